"""Faults that once gave a silently wrong result, a traceback or a process
left running: truncated compressed inputs, a killed run's phaser, two runs
writing one output, unwritable and full output directories, stray haploid
calls, and the inputs that now warn. Each gives one `genimpute: error:`
line (exit status 1, nothing left behind) or a correct result with a
warning. The malformed inputs that always gave one error line are in
test_malformed_inputs.py."""

import gzip
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import vcf_edit
from paths import ARRAY, DATA, PANEL, TARGET_PHASED, TARGET_TRUTH, TARGET_UNPHASED
from tools import require

from genimpute.errors import InputError
from genimpute.io.scratch import PHASE_SCRATCH, publish
from genimpute.io.vcf_writer import VcfWriter

MAP = Path(__file__).parents[1] / "examples" / "data" / "plink.chr20_8.9-9.4Mb.GRCh37.map"


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "genimpute", "-q", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd)


def _impute(target, out, *args, ref=PANEL, genetic_map=MAP):
    return _cli("impute", target, "--ref", ref, "--map", genetic_map, "--out", out, *args)


def _assert_one_error_line(result, *words):
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("genimpute: error:"), result.stderr
    for word in words:
        assert str(word) in lines[0], lines[0]


def _without_eof_block(source: Path, dest: Path) -> Path:
    """`source` cut at its last BGZF block boundary, as a copy that stopped there."""
    data = source.read_bytes()
    dest.write_bytes(data[:-28])
    return dest


# --- truncated compressed inputs -------------------------------------------------------------------
@pytest.mark.parametrize("which", ["target", "panel"])
def test_an_input_cut_at_a_block_boundary_is_refused(which, tmp_path):
    cut = _without_eof_block(TARGET_PHASED if which == "target" else PANEL, tmp_path / f"{which}.cut.vcf.gz")
    out = tmp_path / "out.vcf.gz"
    result = _impute(cut, out) if which == "target" else _impute(TARGET_PHASED, out, ref=cut)
    _assert_one_error_line(result, cut, "truncated")
    assert list(tmp_path.iterdir()) == [cut]


def test_a_truncated_gzip_map_and_a_cut_truth_are_refused(tmp_path):
    packed = gzip.compress(MAP.read_bytes())
    cut_map = tmp_path / "cut.map.gz"
    cut_map.write_bytes(packed[: len(packed) // 2])
    _assert_one_error_line(_impute(TARGET_PHASED, tmp_path / "out.vcf.gz", genetic_map=cut_map), cut_map, "truncated")
    whole_map = tmp_path / "whole.map.gz"
    whole_map.write_bytes(packed + gzip.compress(b""))  # two gzip members, as gzip allows: whole
    from genimpute.io.integrity import check_complete
    check_complete(whole_map)
    cut_truth = _without_eof_block(TARGET_TRUTH, tmp_path / "truth.cut.vcf.gz")
    result = _cli("evaluate", "--truth", cut_truth, DATA / "beagle.imputed.vcf.gz")
    _assert_one_error_line(result, cut_truth, "truncated")


def test_a_cut_compact_panel_is_refused(tmp_path):
    compact = tmp_path / "panel.gpanel"
    assert _cli("panel", PANEL, "--out", compact).returncode == 0
    data = compact.read_bytes()
    compact.write_bytes(data[: len(data) * 2 // 3])
    _assert_one_error_line(_impute(TARGET_PHASED, tmp_path / "out.vcf.gz", ref=compact), compact)


# --- a killed run's phaser --------------------------------------------------------------------------
def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:  # gone meanwhile
                pass
    return found


def _wait_for(condition, seconds: float):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    return condition()


def test_kill_9_during_beagle_phasing_leaves_no_process_and_no_files(tmp_path):
    require("beagle")
    out = tmp_path / "out.vcf.gz"
    run = subprocess.Popen([sys.executable, "-m", "genimpute", "-q", "impute", str(TARGET_UNPHASED), "--ref",
                            str(PANEL), "--out", str(out), "--phaser", "beagle"], stderr=subprocess.PIPE)
    try:
        scratch = _wait_for(lambda: list(tmp_path.glob(f"{PHASE_SCRATCH}.*")), 240)
        assert scratch, "no phaser scratch directory appeared beside the output"
        phaser = _wait_for(lambda: _processes_mentioning(scratch[0].name), 60)
        assert phaser, "beagle was not seen running"
        run.send_signal(signal.SIGKILL)
        run.wait()
        assert _wait_for(lambda: not _processes_mentioning(scratch[0].name), 10), "the phaser outlived genimpute"
    finally:
        run.kill()
        run.wait()
    assert scratch[0].exists()  # SIGKILL cannot be caught: the next run removes it
    again = _impute(TARGET_PHASED, out)
    assert again.returncode == 0, again.stderr
    assert not list(tmp_path.glob(f"{PHASE_SCRATCH}.*"))


# --- two runs writing one output ---------------------------------------------------------------------
def test_an_output_that_appeared_during_the_run_is_not_replaced(tmp_path):
    out = tmp_path / "out.vcf.gz"
    with pytest.raises(InputError, match="another process"):
        with VcfWriter(out) as writer:
            writer.write_header(["s"], ["20"], {})
            out.write_bytes(b"the other run's output")
    assert out.read_bytes() == b"the other run's output"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.vcf.gz"]
    with VcfWriter(out, force=True) as writer:  # --force replaces it
        writer.write_header(["s"], ["20"], {})
    assert out.read_bytes()[:2] == b"\x1f\x8b"


def test_publish_refuses_a_taken_name_without_force(tmp_path):
    tmp, path = tmp_path / "tmp", tmp_path / "path"
    tmp.write_text("new")
    path.write_text("old")
    with pytest.raises(InputError):
        publish(tmp, path, force=False)
    assert path.read_text() == "old"
    publish(tmp, path, force=True)
    assert path.read_text() == "new" and not tmp.exists()


# --- unwritable and full output directories -------------------------------------------------------
@pytest.fixture
def mount(tmp_path):
    """mount(size, read_only): a tmpfs of its own (root only, as on CI)."""
    mounted = []

    def make(size: str = "1m", read_only: bool = False) -> Path:
        point = tmp_path / f"mount{len(mounted)}"
        point.mkdir()
        if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                                                str(point)], capture_output=True).returncode != 0:
            if os.environ.get("GENIMPUTE_CI"):
                pytest.fail("under CI the tests run as root and can mount a tmpfs")
            pytest.skip("mounting a tmpfs needs root")
        mounted.append(point)
        if read_only:
            subprocess.run(["mount", "-o", "remount,ro", str(point)], check=True)
        return point

    yield make
    for point in mounted:
        subprocess.run(["umount", "-l", str(point)], check=False)


def _commands(out_dir: Path) -> dict:
    """Each command with its output in `out_dir`."""
    return {
        "impute": ["impute", TARGET_PHASED, "--ref", PANEL, "--map", MAP, "--out", out_dir / "out.vcf.gz"],
        "panel": ["panel", PANEL, "--out", out_dir / "panel.gpanel"],
        "chunks": ["chunks", "--ref", PANEL, "--size", "1kb", "--out", out_dir / "chunks.txt"],
        "evaluate": ["evaluate", "--truth", TARGET_TRUTH, "--out", out_dir / "report", DATA / "beagle.imputed.vcf.gz"],
        "train": ["train", "--ref", PANEL, "--array", ARRAY, "--steps", "1", "--out", out_dir / "model"],
    }


@pytest.mark.parametrize("command", ["impute", "panel", "chunks"])
def test_an_output_file_in_a_missing_directory_is_one_error_line(command, tmp_path):
    missing = tmp_path / "no" / "such"
    _assert_one_error_line(_cli(*_commands(missing)[command]), tmp_path / "no")
    assert not (tmp_path / "no").exists()


def test_an_output_directory_is_made_with_its_parents(tmp_path):
    """evaluate's and train's --out name directories, made as `mkdir -p` makes them."""
    result = _cli(*_commands(tmp_path / "no" / "such")["evaluate"])
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "no" / "such" / "report").iterdir()) == [
        "calibration.png", "r2_by_maf.png", "report.html", "report.json", "report.md"]


@pytest.mark.parametrize("command", ["impute", "panel", "chunks", "evaluate", "train"])
def test_a_read_only_output_directory_is_one_error_line(command, mount):
    read_only = mount(read_only=True)
    _assert_one_error_line(_cli(*_commands(read_only)[command]), read_only)


def _fill(directory: Path) -> Path:
    """A file taking every free byte of `directory`'s filesystem."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * 4096)
        except OSError:
            pass
    return filler


@pytest.mark.parametrize("command", ["impute", "panel", "evaluate", "chunks", "train"])
def test_a_full_disk_is_one_error_line_naming_where(command, mount):
    full = mount(size="64k")
    filler = _fill(full)
    result = _cli(*_commands(full)[command])
    _assert_one_error_line(result, "No space left on device", full)
    assert [p for p in full.rglob("*") if p.is_file()] == [filler]


# --- stray haploid calls, and what now warns ---------------------------------------------------------
def test_a_haploid_call_on_an_autosome_is_read_as_missing(tmp_path):
    header, records = vcf_edit.read_lines()
    call = records[40][9].split(":")
    records[40][9] = ":".join([call[0][0], *call[1:]])  # the first sample's call at one typed site: haploid
    out = tmp_path / "out.vcf.gz"
    result = _impute(vcf_edit.write(tmp_path / "haploid.vcf", header, records), out)
    assert result.returncode == 0, result.stderr
    assert "1 haploid calls among diploid ones on autosomes read as missing" in result.stderr
    with gzip.open(out, "rt") as handle:
        calls = [line.split("\t")[9].split(":")[0] for line in handle if not line.startswith("#")]
    assert all(len(call) == 3 for call in calls)  # every record of that sample stays diploid


def test_silent_cases_now_warn(tmp_path):
    header, records = vcf_edit.read_lines()
    for record in records:
        record[10] = ".|."  # the second sample: no call anywhere
    target = vcf_edit.write(tmp_path / "uncalled.vcf", header, records)
    backwards = tmp_path / "backwards.map"
    lines = MAP.read_text().splitlines()
    chrom, name, cm, bp = lines[5].split()
    lines[5] = " ".join([chrom, name, str(float(cm) - 5), bp])
    backwards.write_text("\n".join(lines) + "\n")
    result = _impute(target, tmp_path / "out.vcf.gz", "--region", "20:1-1000", genetic_map=backwards)
    assert result.returncode == 0, result.stderr
    assert "1 samples have no call at any typed site" in result.stderr
    assert "the cM fall at 1 of" in result.stderr
    assert "holds no panel record" in result.stderr


@pytest.mark.parametrize("device, said", [("cuda", "runs on the CPU"), ("bogus", "expected auto, cpu or cuda")])
def test_a_device_the_copying_engine_cannot_use_is_one_error_line(device, said, tmp_path):
    _assert_one_error_line(_impute(TARGET_PHASED, tmp_path / "out.vcf.gz", "--device", device), said)
    assert not list(tmp_path.iterdir())
