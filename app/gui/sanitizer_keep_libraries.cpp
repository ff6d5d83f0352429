// Sanitizer builds only (GLASSBOX_SANITIZE): shared libraries stay mapped until the process exits.
//
// Mesa's GLX unloads its driver (and LLVM) with dlclose when the X display closes. Allocations those
// libraries keep until exit are then reported by LeakSanitizer from an "<unknown module>", which
// tools/lsan.supp cannot match by library name, so every GUI test failed on memory that is not ours.
// With dlclose a no-op the modules keep their names, the suppressions apply, and a leak in Glassbox's
// own code is still reported. Exported from the executable (see CMakeLists.txt) so that it interposes on
// the calls made inside the libraries.
#ifdef GLASSBOX_SANITIZE_BUILD
extern "C" int dlclose(void*) { return 0; }
#endif
