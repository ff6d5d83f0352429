// Tokenizers: GPT-2 byte-level BPE (vocab.json + merges.txt or tokenizer.json), SentencePiece-style BPE, and
// BERT's WordPiece (vocab.txt or tokenizer.json).
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace gb {

enum tokenizer_kind {
    TOK_NONE,
    TOK_BYTE_BPE,   // GPT-2 style: bytes -> unicode map, regex pre-split, merges by rank
    TOK_SPM_BPE,    // Llama-2 style: metaspace "▁", merges by score or rank, <0xXX> byte fallback
    TOK_WORDPIECE,  // BERT style: BertNormalizer, words cut at white space and punctuation, greedy longest-match
                    // pieces ("##" before a piece that continues a word), [UNK] for a word that does not split
};

struct tokenizer {
    tokenizer_kind kind = TOK_NONE;
    std::vector<std::string> vocab;                // [V] token strings as stored in the file
    std::unordered_map<std::string, int> ids;      // inverse of vocab
    std::unordered_map<std::string, int> merge_rank; // "left right" -> rank (lower merges first)
    std::vector<float> scores;                     // [V] llama2.c merge scores (SPM kind merges by rank when empty)
    std::vector<std::string> specials;             // special tokens matched verbatim before BPE / WordPiece
    std::vector<std::string> lstrip_specials;      // specials that absorb the white space before them (RoBERTa's <mask>)
    std::vector<std::string> rstrip_specials;      // specials that absorb the white space after them
    std::string split_regex;                       // pre-tokenizer regex (PCRE2); GPT-2's by default
    bool nfc = false;                              // NFC-normalise input first (Qwen2)
    bool ignore_merges = false;                    // a whole pre-token found in the vocabulary is one token (Llama 3)
    bool add_bos = false;                          // model expects BOS at the start
    bool dummy_prefix = false;                     // SentencePiece: prepend a space to each piece of text
    bool prefix_first_only = false;                // Metaspace prepend_scheme "first": only at the very start of
                                                   // the input, not after a special token
    bool prefix_unless_space = false;              // Metaspace: not when the piece already starts with a space
    bool split_words = false;                      // Metaspace split: merges never cross a "▁" word start
    bool space_is_underline = false;               // SentencePiece vocabularies spelling a space as "▁"
                                                   // (tokenizer.json, GGUF; llama2.c stores plain spaces)
    // WordPiece (TOK_WORDPIECE): BertNormalizer's steps, applied in this order to the text between specials
    bool bert_clean_text = false;                  // drop NUL, U+FFFD and control characters; white space -> " "
    bool bert_chinese_chars = false;               // a space before and after each CJK ideograph
    bool bert_strip_accents = false;               // NFD, then drop nonspacing marks (Mn)
    bool bert_lowercase = false;
    std::string subword_prefix = "##";             // continuing_subword_prefix: marks a piece inside a word
    int max_word_chars = 100;                      // max_input_chars_per_word: a longer word is [UNK]
    int bos_id = -1;
    int eos_id = -1;                               // <|endoftext|> for GPT-2
    // The post-processor's template for one text (BERT, RoBERTa). When either is non-empty, encode_prompt puts
    // them around the text and ignores its bos flag; decoder LMs leave both empty and use bos_id / add_bos.
    std::vector<int> prefix_ids;                   // [CLS] or <s>: added before the text by encode_prompt
    std::vector<int> suffix_ids;                   // [SEP] or </s>
    int mask_id = -1;                              // [MASK] / <mask>, -1: none
    int unk_id = -1;                               // [UNK] / <unk>: a word WordPiece cannot split, -1: none
};

// Loaders throw gb::error naming the file and what is wrong.
tokenizer load_gpt2_tokenizer(const std::string& vocab_json, const std::string& merges_txt);
tokenizer load_tokenizer_json(const std::string& tokenizer_json);
// tokenizer_config.json next to tokenizer.json: BOS/EOS tokens, add_bos_token and mask_token (missing file: no
// change).
void apply_tokenizer_config(tokenizer& tok, const std::string& tokenizer_config_json);
// A Hugging Face folder's tokenizer: tokenizer.json with tokenizer_config.json, or vocab.json + merges.txt.
// Only GPT-2 (model_type "gpt2") prefers vocab.json + merges.txt when both exist (they encode alike); for every
// other family tokenizer.json carries what they cannot: the split regex, NFC, added and special tokens.
// Encoders: "bert" and "distilbert" fall back to vocab.txt (+ tokenizer_config.json), "roberta" to
// vocab.json + merges.txt with <s> text </s> and <mask> (absorbing the space before it); for these three a
// tokenizer.json post-processor template is always honoured (decoder LMs get BOS from add_bos instead).
tokenizer load_folder_tokenizer(const std::string& dir, const std::string& model_type);
// BERT's vocab.txt (one token per line, id = line number) with the options of tokenizer_config.json
// (do_lower_case, default true; strip_accents, default: as do_lower_case; tokenize_chinese_chars, default
// true; the *_token names, default [UNK] [CLS] [SEP] [PAD] [MASK]). A missing config file: the defaults.
// [CLS] text [SEP] as the prompt; a vocabulary without the unknown, CLS or SEP token is an error.
tokenizer load_wordpiece_vocab(const std::string& vocab_txt, const std::string& tokenizer_config_json);
// llama2.c tokenizer.bin: int32 max_token_length, then per token float32 score, int32 length, bytes.
// Encodes like llama2.c: a leading "dummy prefix" space, merges by best score, <0xXX> byte fallback.
// BOS = 1 and EOS = 2 as in llama2.c; expected_vocab (when > 0) must match the model's vocabulary.
tokenizer load_llama2c_tokenizer(const std::string& path, int expected_vocab);

// Text -> ids. Invalid UTF-8 throws gb::error ("invalid UTF-8 at byte N").
std::vector<int> encode(const tokenizer& tok, const std::string& text);
// Ids -> text. Out-of-range ids throw gb::error. WordPiece: tokens joined by spaces, a "##" piece glued to the
// one before without its prefix (HF's WordPiece decoder with cleanup off; specials such as [CLS] stay).
// Byte sequences that are not valid UTF-8 on their own
// (a token holding half a character) are shown as "<E6>" by token_text(), never altered by decode().
std::string decode(const tokenizer& tok, const std::vector<int>& ids);
// The raw bytes of one token (may be part of a UTF-8 character); a WordPiece token's stored string ("##ing").
std::string token_bytes(const tokenizer& tok, int id);
// Display text of one token: its bytes, with bytes that are not valid UTF-8 on their own shown as "<E6>".
std::string token_text(const tokenizer& tok, int id);

// A prompt as the model sees it: the post-processor's prefix and suffix around the text when the tokenizer has
// them (BERT's [CLS] text [SEP], RoBERTa's <s> text </s>; bos is then ignored), else BOS first when asked for
// or when the tokenizer expects it.
inline std::vector<int> encode_prompt(const tokenizer& tok, const std::string& text, bool bos) {
    const bool wrapped = !tok.prefix_ids.empty() || !tok.suffix_ids.empty();
    std::vector<int> ids;
    if (wrapped) ids = tok.prefix_ids;
    else if ((bos || tok.add_bos) && tok.bos_id >= 0) ids.push_back(tok.bos_id);
    std::vector<int> body = encode(tok, text);
    ids.insert(ids.end(), body.begin(), body.end());
    if (wrapped) ids.insert(ids.end(), tok.suffix_ids.begin(), tok.suffix_ids.end());
    return ids;
}

// The one token text encodes to (what = "--target", named in the error): throws gb::error saying how it
// tokenized when that is not exactly one token.
int single_token_id(const tokenizer& tok, const std::string& text, const std::string& what);

// GPT-2's split regex as it behaves after digits are cut out first (a HF "Digits" pre-tokenizer; llama.cpp's
// smollm / starcoder pre-tokenizers): one pattern giving the same pieces, for which a digit ends the text.
std::string gpt2_digits_split_regex(bool individual_digits);

// Validates UTF-8; returns the byte offset of the first invalid sequence or -1.
long utf8_invalid_at(const std::string& s);
// Replaces invalid sequences with U+FFFD.
std::string utf8_sanitize(const std::string& s);

} // namespace gb
