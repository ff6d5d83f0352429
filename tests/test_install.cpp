// The .deb, made from this build dir (no second build): what it depends on, what it holds, and that the
// programs run from where it puts them, finding the model installed beside them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "glassbox_version.h"
#include "test_util.h"
#include "tiny_model.h"

namespace fs = std::filesystem;

namespace {

std::string q(const std::string& s) { return "'" + s + "'"; } // the paths here hold no quote

bool have_program(const std::string& name) { return run_command("command -v " + name).code == 0; }

} // namespace

TEST(Install, DebHoldsProgramsModelManPagesAndDesktopEntry) {
    for (const char* tool : {"dpkg-deb", "dpkg-shlibdeps", "man", "desktop-file-validate", "help2man"})
        ASSERT_TRUE(have_program(tool)) << tool << " is missing: run tools/setup.sh --tests";
    const std::string tmp = test_temp_dir("install_deb"), build = GLASSBOX_BINARY_DIR;
    const bool gui = fs::exists(build + "/glassbox");

    // What the package holds, installed from this build dir by its install rules (cmake --install never builds,
    // unlike cpack's own install step, which would make `all` while other tests run), then made into the .deb
    // by this build's CPack configuration: the same control data, Depends from dpkg-shlibdeps.
    const std::string stage = tmp + "/stage";
    command_result inst = run_command("(" + std::string(GLASSBOX_CMAKE) + " --install " + q(build) + " --prefix " +
                                      q(stage + "/usr") + " --strip)");
    ASSERT_EQ(inst.code, 0) << inst.out << inst.err;
    command_result pack = run_command("(" + std::string(GLASSBOX_CPACK) + " -G DEB --config " +
                                      q(build + "/CPackConfig.cmake") + " -B " + q(tmp + "/pkg") +
                                      " -D CPACK_INSTALL_CMAKE_PROJECTS= -D " + q("CPACK_INSTALLED_DIRECTORIES=" + stage + ";.") + ")");
    ASSERT_EQ(pack.code, 0) << pack.out << pack.err;
    std::string deb;
    for (const auto& e : fs::directory_iterator(tmp + "/pkg"))
        if (e.path().extension() == ".deb") deb = e.path().string();
    ASSERT_FALSE(deb.empty()) << pack.out;
    const std::string deb_name = fs::path(deb).filename().string(); // Debian's name_version_arch.deb
    EXPECT_EQ(deb_name.rfind(std::string("glassbox_") + GLASSBOX_VERSION + "_", 0), 0u) << deb_name;

    // Depends: runtime packages only (dpkg-shlibdeps on the binaries, plus the app's GL and font)
    command_result dep = run_command("dpkg-deb -f " + q(deb) + " Depends");
    ASSERT_EQ(dep.code, 0) << dep.err;
    EXPECT_EQ(dep.out.find("-dev"), std::string::npos) << "a -dev package in Depends: " << dep.out;
    for (const char* p : {"libc6", "libstdc++6", "libgomp1"}) EXPECT_NE(dep.out.find(p), std::string::npos) << p << " in " << dep.out;
    if (gui) {
        for (const char* p : {"libglfw3", "libgl1", "fonts-dejavu-core"})
            EXPECT_NE(dep.out.find(p), std::string::npos) << p << " in " << dep.out;
    }

    const std::string root = tmp + "/root";
    command_result x = run_command("dpkg-deb -x " + q(deb) + " " + q(root));
    ASSERT_EQ(x.code, 0) << x.err;
    const std::string usr = root + "/usr";
    std::vector<std::string> files = {"bin/glassbox-cli", "share/glassbox/assets/models/DEFAULT",
                                      "share/glassbox/assets/saes/DEFAULT", "share/man/man1/glassbox-cli.1"};
    if (gui)
        files.insert(files.end(), {"bin/glassbox", "share/man/man1/glassbox.1", "share/applications/glassbox.desktop",
                                   "share/icons/hicolor/scalable/apps/glassbox.svg"});
    for (const std::string& f : files) EXPECT_TRUE(fs::exists(usr + "/" + f)) << f << " is not in the .deb";

    // No --model: the model installed beside the program, not the source tree's (which the build would also
    // find): `info` names the path it loaded.
    const std::string cli = q(usr + "/bin/glassbox-cli");
    command_result info = run_command(cli + " info");
    ASSERT_EQ(info.code, 0) << info.err;
    const std::string model_path = nlohmann::json::parse(info.out).at("path");
    const std::string installed = fs::weakly_canonical(usr + "/share/glassbox/assets/models").string();
    EXPECT_EQ(model_path.rfind(installed + "/", 0), 0u) << "loaded " << model_path << ", not the installed model in " << installed;
    command_result run = run_command(cli + " run --prompt 'The cat sat on the'");
    ASSERT_EQ(run.code, 0) << run.err;
    EXPECT_NE(run.out.find("top 10 next tokens"), std::string::npos) << run.out;
    // No --sae on the default model: the SAE installed beside it (its path in the JSON)
    command_result feats = run_command(cli + " features --prompt 'The cat sat on the' --json " + q(tmp + "/f.json"));
    ASSERT_EQ(feats.code, 0) << feats.err;
    const std::string sae_path = nlohmann::json::parse(read_file(tmp + "/f.json")).at("sae");
    const std::string saes = fs::weakly_canonical(usr + "/share/glassbox/assets/saes").string();
    EXPECT_EQ(sae_path.rfind(saes + "/", 0), 0u) << "used " << sae_path << ", not the installed SAE in " << saes;
    command_result version = run_command(cli + " --version");
    EXPECT_EQ(version.code, 0);
    EXPECT_EQ(version.out.rfind("glassbox-cli ", 0), 0u) << version.out;
    if (gui) {
        command_result app = run_command(q(usr + "/bin/glassbox") + " --version"); // before any window opens
        EXPECT_EQ(app.code, 0) << app.err;
        EXPECT_EQ(app.out.rfind("glassbox ", 0), 0u) << app.out;
    }

    // the man pages render without a warning; each names its program and has the exit codes (the CLI's)
    for (const std::string& prog : gui ? std::vector<std::string>{"glassbox-cli", "glassbox"} : std::vector<std::string>{"glassbox-cli"}) {
        const std::string page = usr + "/share/man/man1/" + prog + ".1";
        command_result man = run_command("(MANWIDTH=100 LC_ALL=C.UTF-8 man --warnings -E UTF-8 -l " + q(page) + ")");
        EXPECT_EQ(man.code, 0) << prog << ": " << man.err;
        EXPECT_EQ(man.err, "") << prog << ".1: warnings from man -l";
        EXPECT_NE(man.out.find("NAME"), std::string::npos) << man.out;
        EXPECT_NE(man.out.find(prog + " - "), std::string::npos) << man.out;
        if (prog == "glassbox-cli") {
            EXPECT_NE(man.out.find("Exit codes"), std::string::npos) << man.out;
        }
    }
    if (gui) {
        command_result v = run_command("desktop-file-validate " + q(usr + "/share/applications/glassbox.desktop"));
        EXPECT_EQ(v.code, 0) << v.out << v.err;
        EXPECT_EQ(v.out + v.err, "") << "desktop-file-validate has remarks";
        std::ifstream desktop(usr + "/share/applications/glassbox.desktop");
        std::stringstream text;
        text << desktop.rdbuf();
        EXPECT_NE(text.str().find("\nExec=glassbox"), std::string::npos) << "the .desktop starts the installed app";
        EXPECT_NE(text.str().find("\nIcon=glassbox\n"), std::string::npos) << "the .desktop names the installed icon";
    }
    if (!HasFailure()) fs::remove_all(tmp); // 10+ MB; kept for a look when something failed
}
