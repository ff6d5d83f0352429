// What a Browse... button (file_dialog.h) browses for, and the folder listings of its in-app browser.
//
// What a box takes (browse_kind) decides the filter and what counts as a choice: a model is a file of a model
// format or a folder holding config.json (a Hugging Face folder opens as one, not as a folder to enter); an SAE is
// SAELens's folder (cfg.json) or an .npz; a folder to write into is the folder shown. The listing and navigation
// (browse_listing, below) know nothing of ImGui, so the tests check them directly.
#pragma once
#include <string>
#include <vector>

namespace gbui {

enum browse_kind {
    BROWSE_MODEL,       // a model folder (config.json), .gguf, .bin (llama2.c), .safetensors
    BROWSE_SAE,         // an SAE folder (cfg.json), .npz, .safetensors
    BROWSE_TRANSCODERS, // a transcoder set: a folder of layer_*.safetensors or W_enc_*.safetensors
    BROWSE_TEXT,        // a corpus: .txt, .md, or any file
    BROWSE_CONTROL_VECTOR, // a steering vector: .gguf (llama.cpp's control vector) or .npy
    BROWSE_SESSION,     // a session: .json
    BROWSE_IMAGE,       // .png, .jpg, .jpeg
    BROWSE_FOLDER,      // a folder (to write exports or a trained SAE into)
    BROWSE_KIND_COUNT
};
const char* browse_kind_title(browse_kind k); // "Open a model", "Choose a folder", ... (the dialogs' titles)
const char* browse_kind_noun(browse_kind k);  // "a model", "a folder", ... (messages)

struct browse_entry {
    std::string name;     // as in the folder ("gpt2", "model.gguf")
    bool dir = false;     // a folder to enter (not one that is itself a choice)
    bool choice = false;  // what the box takes: a file of its kind, or a folder that is one (a model folder)
    long long bytes = -1; // a file's size (-1: a folder)
};

// One folder's entries for a kind: folders first, then files, each by name (case-insensitive); hidden entries
// (a leading '.') only when show_hidden; files the kind does not take are left out unless all_files.
struct browse_listing {
    std::string dir;                  // absolute, no trailing '/' (but "/")
    std::vector<browse_entry> entries;
    std::string error;                // one line when the folder cannot be read ("" when it could)
};
browse_listing list_folder(const std::string& dir, browse_kind kind, bool show_hidden = false, bool all_files = false);
// Whether path (a file or folder) is what kind takes.
bool browse_accepts(const std::string& path, browse_kind kind);
// The folder a browser starts in for a box of `kind` holding `current`: the folder it names (a folder to browse),
// or the one holding it (a file, or a folder that is itself a choice, as a model folder), else the home folder,
// else the working folder.
std::string browse_start_folder(const std::string& current, browse_kind kind);
// The parent of an absolute folder ("/" stays "/").
std::string parent_folder(const std::string& dir);

} // namespace gbui
