"""bench/gpu/sass_hotspots.py on a small source page written here: the duplicate page is
skipped, samples are summed by reason, and memory instructions are classed by address space."""
from conftest import REPO, _load

hotspots = _load("sass_hotspots", REPO / "bench" / "gpu" / "sass_hotspots.py")

HEADER = ('"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed",'
          '"stall_wait","stall_lg","stall_wait (Not Issued)"')
PAGE = [
    '"Kernel Name","k1"', HEADER,
    '"0x10","LDS R1, [R2]","5","100","5","0","1"',
    '"0x20","ST.E desc[UR4][R2.64], R1","30","7","10","20","3"',
    '"0x30","@!P0 STS [R3], R4","0","50","0","0","0"',
    '"0x40","LDL R5, [R1]","1","2","1","0","0"',
]


def test_summary_counts_spaces_reasons_and_skips_the_repeated_page(tmp_path, capsys,
                                                                   monkeypatch):
    csv = tmp_path / "page.csv"
    csv.write_text("\n".join(PAGE + PAGE) + "\n")
    monkeypatch.setattr("sys.argv", ["sass_hotspots.py", str(csv), "--top", "2"])
    assert hotspots.main() == 0
    text = capsys.readouterr().out
    assert text.count("== k1") == 1
    assert "samples: 36" in text
    assert "wait 44.4%" in text and "lg 55.6%" in text
    assert "shared 150" in text and "generic 7" in text and "local 2" in text
    top = [line for line in text.splitlines() if line.startswith("  ")]
    assert len(top) == 2 and "ST.E" in top[0] and "LDS" in top[1]


def test_space_of_reads_the_opcode_past_a_predicate():
    assert hotspots.space_of("@!P0  LDG.E R1, desc[UR4][R2.64]") == "global"
    assert hotspots.space_of("LD.E.64 R22, desc[UR22][R20.64+0x2c000]") == "generic"
    assert hotspots.space_of("STS.128 [R1], R4") == "shared"
    assert hotspots.space_of("FFMA R1, R2, R3, R4") is None
