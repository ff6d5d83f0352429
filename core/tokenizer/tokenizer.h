// Tokenizers: GPT-2 byte-level BPE (vocab.json + merges.txt or tokenizer.json), SentencePiece-style BPE,
// BERT's WordPiece (vocab.txt or tokenizer.json) and SentencePiece Unigram (tokenizer.json).
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
    TOK_UNIGRAM,    // SentencePiece Unigram (T5, Marian, mBART-50, XLM-R): normalizers, WhitespaceSplit / Metaspace,
                    // the segmentation with the highest summed piece score (Viterbi), a run of unknown characters
                    // as one unk, optional <0xXX> byte fallback
};

// One step of a tokenizer.json normalizer pipeline (Unigram tokenizers), applied in order to the text between
// specials.
enum normalizer_kind {
    NORM_NFC, NORM_NFD, NORM_NFKC, NORM_NFKD, // Unicode normal forms (utf8proc)
    NORM_LOWERCASE,                           // per character, full lower case (U+0130 -> "i" U+0307), no final sigma
    NORM_STRIP,                               // white space off the start and/or end
    NORM_REPLACE,                             // every match of a string or regex -> content
    NORM_PREPEND,                             // content before a non-empty text
    NORM_PRECOMPILED,                         // SentencePiece's precompiled_charsmap, read as HF's tokenizers do
};

struct normalizer_step {
    normalizer_kind kind = NORM_NFKC;
    std::string pattern;                // NORM_REPLACE: the string to find, or a regex (PCRE2) when regex is set
    bool regex = false;
    std::string content;                // NORM_REPLACE: the replacement (literal); NORM_PREPEND: the prefix
    bool strip_left = false, strip_right = false; // NORM_STRIP
    // NORM_PRECOMPILED: the charsmap's double-array trie (darts-clone units: byte label, leaf flag, offset to the
    // children) over the UTF-8 of the sequences it rewrites; a leaf's value is a byte offset into `normalized`,
    // where the replacement runs to the next NUL. Empty trie: no rewriting.
    std::vector<uint32_t> trie;         // [units]
    std::string normalized;             // replacement strings, each ended by NUL
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
    // Unigram (TOK_UNIGRAM). Pre-tokenizing uses dummy_prefix, prefix_first_only and split_words (Metaspace,
    // replacement "▁"); prefix_unless_space is always on, as in HF.
    std::vector<normalizer_step> normalizers;      // tokenizer.json's normalizer, flattened in order
    bool whitespace_split = false;                 // WhitespaceSplit: words cut at white space, which is dropped
    bool metaspace = false;                        // Metaspace: " " -> "▁", the prefix, words cut before each "▁"
    std::vector<double> piece_scores;              // [V_model] each model piece's log probability (ids from
                                                   // V_model on are added tokens, never in the lattice)
    std::vector<int> pieces_sorted;                // model ids ordered by their pieces' bytes, one per distinct
                                                   // non-empty piece (the last id of a repeated one, as HF)
    double unk_score = 0;                          // an unknown character's score: the lowest piece score - 10
    bool byte_fallback = false;                    // an unknown run becomes its bytes' <0xXX> pieces (all must exist)
    bool decode_strip_space = false;               // decoding drops the first token's "▁"s instead of making them
                                                   // spaces (HF's Metaspace decoder with a prepend scheme)
    int bos_id = -1;
    int eos_id = -1;                               // <|endoftext|> for GPT-2
    // The post-processor's template for one text (BERT, RoBERTa, T5). When either is non-empty, encode_prompt
    // puts them around the text and ignores its bos flag; decoder LMs leave both empty and use bos_id / add_bos.
    std::vector<int> prefix_ids;                   // [CLS] or <s>: added before the text by encode_prompt
    std::vector<int> suffix_ids;                   // [SEP] or </s>
    int mask_id = -1;                              // [MASK] / <mask>, -1: none
    int unk_id = -1;                               // [UNK] / <unk>: a word WordPiece cannot split, Unigram's unknown
                                                   // characters; -1: none
};

// Loaders throw gb::error naming the file and what is wrong.
tokenizer load_gpt2_tokenizer(const std::string& vocab_json, const std::string& merges_txt);
// tokenizer.json: a BPE, WordPiece or Unigram model. Unigram ("vocab": [[piece, score], ...], unk_id,
// byte_fallback; a model without "type" whose vocab is a list) takes normalizers Precompiled, NFKC, NFKD, NFC,
// NFD, Replace, Strip, Lowercase, Prepend (in a Sequence too) and the pre-tokenizers WhitespaceSplit, then
// Metaspace ("▁"); its TemplateProcessing template (T5's "$A </s>") is always honoured.
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
// Unigram: the pieces' text ("▁" a space, <0xXX> its byte) joined, the first token's "▁"s dropped when the
// decoder is Metaspace with a prepend scheme (specials such as </s> stay).
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
