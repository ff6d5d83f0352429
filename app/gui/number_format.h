// How the app writes numbers on screen: one formatter for values (3 significant digits, SI prefixes from 10 000 up:
// 1.36 M, 379 k), one for changes (Δp: a sign, and no "-0.000"), and one for an axis's ticks (one unit and one
// number of decimals on every tick). No ImGui here, so the tests can check the strings themselves.
#pragma once
#include <string>
#include <vector>

namespace gbui {

// 0, 0.0523, 0.123, 4.12, 41.2, 412, 4120, 41.2 k, 1.36 M, 2.50 G; "inf", "-inf", "nan"; never "-0.00".
std::string format_number(double v);
// A change with `decimals` decimals and its sign: "+0.012", "-0.250", and "0.000" (no sign) when it rounds to zero.
std::string format_delta(double v, int decimals = 3);
// The sign of v as format_delta shows it: 0 when it rounds to zero at `decimals` decimals, else -1 or +1.
int shown_sign(double v, int decimals = 3);
// Tick labels of one axis: every tick in the unit of the largest (k, M, G) with as many decimals as the smallest
// step between them needs (at most 3), 0 as "0": {0, 381k, 762k, 1.14M, 1.52M} -> "0", "0.38 M", "0.76 M", ... all in M.
std::vector<std::string> format_ticks(const std::vector<double>& ticks);

} // namespace gbui
