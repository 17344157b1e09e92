// Implementation of ProgressBar (see progress_bar.h).
#include "progress_bar.h"

#include <algorithm>
#include <cstdio>

namespace cm::cli {
namespace {
constexpr int kBarCells = 30;
}

ProgressBar::ProgressBar(std::ostream& out, bool enabled, double delay_seconds)
    : out_(out), enabled_(enabled), delay_seconds_(delay_seconds) {}

void ProgressBar::start(const std::string& phase) {
  finish();
  phase_ = phase;
  started_ = std::chrono::steady_clock::now();
}

void ProgressBar::update(double fraction) {
  if (!enabled_) return;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  if (!drawn_ && elapsed < delay_seconds_) return;
  fraction = std::clamp(fraction, 0.0, 1.0);
  const int done = static_cast<int>(fraction * kBarCells + 0.5);
  char tail[64];
  std::snprintf(tail, sizeof tail, "] %3d%%  %.1f s", static_cast<int>(fraction * 100 + 0.5),
                elapsed);
  out_ << "\r" << phase_ << " [" << std::string(done, '#') << std::string(kBarCells - done, '.')
       << tail << std::flush;
  drawn_ = true;
}

void ProgressBar::finish() {
  if (drawn_) out_ << "\n" << std::flush;
  drawn_ = false;
}

}  // namespace cm::cli
