"""nvidia-smi sampling for bench/gpu/power_probe.py, apart so that the parsing is tested on the
CPU (tests/python/test_smi_samples.py): a sampler that runs `nvidia-smi --query-gpu ... -lms`
in the background, and the summary of its samples (clock percentiles, power, the clock-event
reasons' shares).

  sampler = Sampler(query_fields(), interval_ms=50)
  ... work ...
  since = datetime.datetime.now()
  ... the part to summarize ...
  summary = summarize(sampler.stop(since))
"""
import datetime
import os
import subprocess

import numpy as np

# Sample cells, in this order: the time stamp, then the values summarize() reads.
FIELDS = ("timestamp", "clocks.sm", "power.draw", "enforced.power.limit", "temperature.gpu")
# The clock-event reasons field was named clocks_throttle_reasons before newer drivers.
REASON_FIELDS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")
REASONS = {0x1: "idle", 0x2: "app_clocks", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
           0x10: "sync_boost", 0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake",
           0x100: "display_clocks"}
TIMESTAMP = "%Y/%m/%d %H:%M:%S.%f"  # nvidia-smi's, in local time


def query_fields():
    """FIELDS and the name of the reasons field this driver answers."""
    for reason in REASON_FIELDS:
        fields = FIELDS + (reason,)
        probe = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}",
                                "--format=csv,noheader,nounits"], capture_output=True, text=True)
        if probe.returncode == 0 and "not a valid field" not in probe.stdout + probe.stderr:
            return fields
    raise RuntimeError("nvidia-smi answers neither clock-event reasons field")


def parse_samples(lines, since):
    """The samples (lists of cells) of nvidia-smi's csv lines stamped at or after `since` (a
    naive local datetime); lines without a readable time stamp are dropped."""
    samples = []
    for line in lines:
        cells = [cell.strip() for cell in line.split(",")]
        try:
            stamp = datetime.datetime.strptime(cells[0], TIMESTAMP)
        except ValueError:
            continue
        if stamp >= since:
            samples.append(cells)
    return samples


class Sampler:
    """nvidia-smi sampling `fields` of the first visible GPU every interval_ms, from
    construction until stop()."""

    def __init__(self, fields, interval_ms):
        device = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
        self.process = subprocess.Popen(
            ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits",
             "-lms", str(interval_ms), "-i", device],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def stop(self, since):
        """Ends the sampling; returns the samples taken at or after `since`."""
        self.process.terminate()
        return parse_samples(self.process.communicate()[0].splitlines(), since)


def _column(samples, index):
    """The numeric cells of column `index` ("[N/A]" and the like skipped)."""
    values = []
    for cells in samples:
        try:
            values.append(float(cells[index]))
        except (IndexError, ValueError):
            continue
    return np.array(values)


def summarize(samples):
    """Median SM clock (MHz) with its 10th and 90th percentiles, median power (W), the
    enforced limit (W), the highest temperature, and each clock-event reason (the hex mask in
    the last cell) with the share of samples it was active in. None where no sample had a
    value."""
    clock, power, limit, temp = (_column(samples, i) for i in range(1, 5))
    statistic = lambda values, fn: float(fn(values)) if values.size else None
    counts = {}
    for cells in samples:
        try:
            bits = int(cells[5], 16)
        except (IndexError, ValueError):
            continue
        for bit, name in REASONS.items():
            if bits & bit:
                counts[name] = counts.get(name, 0) + 1
    return {"samples": len(samples),
            "clock_mhz": statistic(clock, np.median),
            "clock_p10_mhz": statistic(clock, lambda x: np.percentile(x, 10)),
            "clock_p90_mhz": statistic(clock, lambda x: np.percentile(x, 90)),
            "power_w": statistic(power, np.median),
            "limit_w": statistic(limit, np.median),
            "max_temp_c": statistic(temp, np.max),
            "reasons": {name: n / max(1, len(samples)) for name, n in sorted(counts.items())}}
