// Reads a JSON array of strings on stdin, prints a JSON array of GPT-2 id arrays (gpt-3-encoder's encode()).
const { encode } = require('gpt-3-encoder');
let input = '';
process.stdin.on('data', (d) => (input += d));
process.stdin.on('end', () => {
  const texts = JSON.parse(input);
  process.stdout.write(JSON.stringify(texts.map((t) => encode(t))));
});
