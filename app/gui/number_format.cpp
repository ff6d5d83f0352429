// How the app writes numbers on screen (number_format.h).
#include "number_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace gbui {

namespace {

struct si_unit {
    double scale;
    const char* suffix; // with its space: "1.36 M"
};

// The prefix a value is written with: none below 10 000 (4120 reads better than 4.12 k), else k, M, G, T.
si_unit unit_of(double a) {
    if (a >= 1e12) return {1e12, " T"};
    if (a >= 1e9) return {1e9, " G"};
    if (a >= 1e6) return {1e6, " M"};
    if (a >= 1e4) return {1e3, " k"};
    return {1, ""};
}

// "%.*f" without a minus sign on a value that rounds to zero
std::string fixed(double v, int decimals) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*f", decimals, v);
    std::string s = b;
    if (s[0] == '-' && s.find_first_not_of("-0.") == std::string::npos) s.erase(0, 1);
    return s;
}

// decimals that keep 3 significant digits of a mantissa m (1 <= |m| < 10 000)
int decimals_for(double m) {
    const double a = std::fabs(m);
    return a >= 100 ? 0 : a >= 10 ? 1 : 2;
}

} // namespace

std::string format_number(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    const double a = std::fabs(v);
    if (a == 0) return "0";
    if (a < 1) { // 0.523, 0.0523, 1.2e-05: small values keep 3 significant digits rather than showing as 0.000
        char b[32];
        std::snprintf(b, sizeof b, "%.3g", v);
        return b;
    }
    if (a < 1e4 && std::round(a) >= 1e4) return format_number(v > 0 ? 1e4 : -1e4); // 9999.7: "10.0 k"
    const si_unit u = unit_of(a);
    double m = v / u.scale;
    // rounding may carry into the next unit (999 950 -> 1000 k): write it with the next one
    if (u.scale > 1 && std::fabs(std::round(m * std::pow(10, decimals_for(m))) / std::pow(10, decimals_for(m))) >= 1000)
        return format_number(v >= 0 ? u.scale * 1000 : -u.scale * 1000);
    return fixed(m, u.scale > 1 ? decimals_for(m) : (a >= 1000 ? 0 : decimals_for(m))) + u.suffix;
}

int shown_sign(double v, int decimals) {
    if (!std::isfinite(v)) return std::isnan(v) ? 0 : v > 0 ? 1 : -1;
    const double r = std::round(std::fabs(v) * std::pow(10, decimals));
    return r == 0 ? 0 : v > 0 ? 1 : -1;
}

std::string format_delta(double v, int decimals) {
    if (std::isnan(v)) return "nan";
    const int sign = shown_sign(v, decimals);
    const std::string body = fixed(std::fabs(v), decimals);
    return sign > 0 ? "+" + body : sign < 0 ? "-" + body : body;
}

std::vector<std::string> format_ticks(const std::vector<double>& ticks) {
    double top = 0, step = 0;
    for (double t : ticks)
        if (std::isfinite(t)) top = std::max(top, std::fabs(t));
    for (size_t i = 1; i < ticks.size(); i++) {
        const double d = std::fabs(ticks[i] - ticks[i - 1]);
        if (std::isfinite(d) && d > 0 && (step == 0 || d < step)) step = d;
    }
    const si_unit u = unit_of(top);
    // enough decimals that neighbouring ticks differ: a step of 0.38 (in the unit) needs 2, 3.8 needs 1
    int decimals = 0;
    if (step > 0)
        while (decimals < 3 && step / u.scale * std::pow(10, decimals) < 9.5) decimals++;
    std::vector<std::string> out;
    for (double t : ticks) out.push_back(t == 0 ? "0" : std::isfinite(t) ? fixed(t / u.scale, decimals) + u.suffix : format_number(t));
    return out;
}

} // namespace gbui
