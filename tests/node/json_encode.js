// Usage: node json_encode.js TOKENIZER_JSON [TOKENIZER_CONFIG_JSON] [--decode] < input.json
// Loads a tokenizer.json (and tokenizer_config.json, which picks the tokenizer class) through @lenml/tokenizers
// (transformers.js tokenizers) and prints a JSON array:
//   encode (default): input is a JSON array of texts; output their id arrays WITH the special tokens the
//                     post-processor adds ([CLS] ... [SEP], <s> ... </s>).
//   --decode:         input is a JSON array of id arrays; output their texts, special tokens kept, no clean-up.
const fs = require('fs');
const { TokenizerLoader } = require('@lenml/tokenizers');

const args = process.argv.slice(2);
const decode = args.includes('--decode');
const files = args.filter((a) => a !== '--decode');
if (files.length < 1 || files.length > 2) {
  process.stderr.write('usage: node json_encode.js TOKENIZER_JSON [TOKENIZER_CONFIG_JSON] [--decode] < input.json\n');
  process.exit(2);
}
const tokenizerJSON = JSON.parse(fs.readFileSync(files[0], 'utf8'));
const tokenizerConfig = files[1] ? JSON.parse(fs.readFileSync(files[1], 'utf8')) : {};
const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });

let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (d) => (input += d));
process.stdin.on('end', () => {
  const items = JSON.parse(input);
  const out = decode
    ? items.map((ids) => (ids.length ? tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }) : ''))
    : items.map((t) => tok.encode(t, { add_special_tokens: true }));
  process.stdout.write(JSON.stringify(out));
});
