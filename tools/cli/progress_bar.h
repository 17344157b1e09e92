// A one-line progress bar on a terminal stream, redrawn in place with '\r'.
#pragma once

#include <chrono>
#include <ostream>
#include <string>

namespace cm::cli {

class ProgressBar {
 public:
  // `delay_seconds`: nothing is drawn for a phase until it has run this long, so short runs
  // stay quiet. A disabled bar draws nothing.
  ProgressBar(std::ostream& out, bool enabled, double delay_seconds);

  // Starts a new phase (ending the previous one).
  void start(const std::string& phase);
  // Precondition: fraction in [0, 1].
  void update(double fraction);
  // Ends the current phase's line if anything was drawn.
  void finish();

 private:
  std::ostream& out_;
  bool enabled_;
  double delay_seconds_;
  std::string phase_;
  std::chrono::steady_clock::time_point started_;
  bool drawn_ = false;
};

}  // namespace cm::cli
