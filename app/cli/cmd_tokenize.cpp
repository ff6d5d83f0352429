// glassbox-cli tokenize: text to token ids, or ids back to text, with a model's tokenizer or a folder's.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "util/json_util.h"

#include "args.h"
#include "commands.h"

namespace cli {

int cmd_tokenize(const args& a) {
    gb::tokenizer tok;
    if (a.has("tokenizer") && !a.has("model")) {
        // the folder's tokenizer exactly as a model load picks it: tokenizer.json with tokenizer_config.json
        // (BOS/EOS, add_bos_token), or vocab.json + merges.txt for GPT-2 (model_type from config.json if any)
        std::string dir = a.get("tokenizer"), model_type;
        if (std::ifstream(dir + "/config.json"))
            model_type = gb::json_string(gb::read_json_file(dir + "/config.json"), "model_type", "", dir + "/config.json");
        tok = gb::load_folder_tokenizer(dir, model_type);
    } else {
        tok = open_model(a).tok;
    }
    if (a.has("specials") && a.has("decode")) throw usage_error("--specials goes with --text");
    if (a.has("decode")) {
        std::vector<int> ids;
        for (const std::string& s : split(a.get("decode"), ','))
            ids.push_back((int)parse_int(s, "--decode", 0, (long)tok.vocab.size() - 1));
        // Raw by default: the decoded bytes exactly, for pipes and files (decode(encode(x)) == x). --escape
        // is for a terminal: control characters, which could move the cursor or recolour it, shown escaped.
        const std::string text = gb::decode(tok, ids);
        if (a.has("escape")) {
            std::printf("%s\n", terminal_safe(gb::utf8_sanitize(text), true).c_str());
        } else {
            std::fwrite(text.data(), 1, text.size(), stdout); // fwrite: a NUL byte is text too
            std::fputc('\n', stdout);
        }
        return 0;
    }
    if (a.has("escape")) throw usage_error("--escape goes with --decode");
    const std::string text = a.need("text");
    const std::vector<int> bare = gb::encode(tok, text), framed = gb::encode_prompt(tok, text, false);
    std::printf("%s\n", nlohmann::json(a.has("specials") ? framed : bare).dump().c_str());
    // the plain encoding is not what a model reads when its tokenizer frames a prompt: say so (on stderr, so a
    // pipe still gets one JSON array)
    if (!a.has("specials") && framed != bare)
        std::fprintf(stderr, "note: run and the app read %s (the tokenizer's template around the text; --specials "
                             "prints those ids)\n", nlohmann::json(framed).dump().c_str());
    return 0;
}

} // namespace cli
