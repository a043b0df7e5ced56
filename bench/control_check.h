// Is the control fit to be a reference? static-pinned (prefaulted, locked,
// copied into) does the same work per datagram in every scenario; if its CPU
// per datagram in a scenario is more than twice its own steady state's in the
// same run, something outside the contenders (set-up inside the window, the
// machine) starved it, and a ratio against it would flatter whoever it is
// compared with: the ratio is withheld.
#pragma once

namespace npf::bench {

inline constexpr double kStarvedCpuRatio = 2.0;

struct ControlCheck {
    enum class Verdict { Ok, Starved, Unchecked };
    Verdict verdict = Verdict::Unchecked;
    double cpuRatio = 0; // scenario / steady CPU per datagram; 0 if unknown

    const char* name() const noexcept
    {
        return verdict == Verdict::Ok ? "ok" : verdict == Verdict::Starved ? "starved" : "unchecked";
    }
};

// scenarioCpuNs: the control's CPU per datagram in the scenario (0: it
// received nothing, starved whatever the reference); steadyCpuNs: in the
// steady state of the same run (0: not measured, nothing to check against).
constexpr ControlCheck checkControl(double scenarioCpuNs, double steadyCpuNs) noexcept
{
    if (scenarioCpuNs <= 0)
        return {ControlCheck::Verdict::Starved, 0};
    if (steadyCpuNs <= 0)
        return {ControlCheck::Verdict::Unchecked, 0};
    const double r = scenarioCpuNs / steadyCpuNs;
    return {r > kStarvedCpuRatio ? ControlCheck::Verdict::Starved : ControlCheck::Verdict::Ok, r};
}

} // namespace npf::bench
