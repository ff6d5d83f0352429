// Wall-clock timing for the reports' "took N ms" (one definition for the core and the app).
#pragma once
#include <chrono>

namespace gb {

// Milliseconds from t0 to now, on the steady clock
inline double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace gb
