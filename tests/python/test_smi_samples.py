"""bench/gpu/smi_samples.py on nvidia-smi lines written here: samples before the cut are
dropped, unreadable cells are skipped, and the clock-event reasons are decoded from the mask."""
import datetime

from conftest import REPO, _load

smi = _load("smi_samples", REPO / "bench" / "gpu" / "smi_samples.py")

LINES = [
    "2026/12/03 13:04:01.000, 1980, 300.10, 700.00, 50, 0x0000000000000001",
    "2026/12/03 13:04:02.000, 1700, 690.00, 700.00, 60, 0x0000000000000004",
    "2026/12/03 13:04:02.050, 1600, 692.00, 700.00, 62, 0x0000000000000004",
    "2026/12/03 13:04:02.100, 1650, [N/A], 700.00, 61, 0x000000000000000C",
    "2026/12/03 13:04:02.150, 1500, 688.00, 700.00, 63, [N/A]",
    "not a sample line",
]
CUT = datetime.datetime(2026, 12, 3, 13, 4, 2)


def test_parse_keeps_the_samples_from_the_cut_on():
    samples = smi.parse_samples(LINES, CUT)
    assert [cells[1] for cells in samples] == ["1700", "1600", "1650", "1500"]
    assert len(smi.parse_samples(LINES, datetime.datetime(2026, 12, 3, 13, 5))) == 0


def test_summary_of_clock_power_and_reasons():
    summary = smi.summarize(smi.parse_samples(LINES, CUT))
    assert summary["samples"] == 4
    assert summary["clock_mhz"] == 1625.0  # median of 1500, 1600, 1650, 1700
    assert 1500.0 < summary["clock_p10_mhz"] < 1600.0
    assert summary["power_w"] == 690.0  # the [N/A] cell skipped
    assert summary["limit_w"] == 700.0
    assert summary["max_temp_c"] == 63.0
    # 0x4 in three samples, 0x8 (hw_slowdown) in one; the [N/A] mask counts for nothing.
    assert summary["reasons"] == {"hw_slowdown": 0.25, "sw_power_cap": 0.75}


def test_summary_without_samples_has_no_values():
    summary = smi.summarize([])
    assert summary["samples"] == 0 and summary["clock_mhz"] is None
    assert summary["reasons"] == {}
