"""Nothing lost or half-written when a run is killed, and outputs that do not
depend on how the work was split: kill impute mid-write, kill training and
resume it, impute with other thread counts and sample subsets."""

import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from cli_helpers import TINY
from paths import ARRAY, PANEL, TARGET_PHASED
from tools import run_tool

from genimpute.modeldir import load_model_dir


def _genimpute(*args, env=None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "genimpute", "-q", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})


def _wait_for(predicate, proc, timeout=120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, f"finished before it could be interrupted: {proc.communicate()}"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _records(path) -> str:
    return run_tool(["bcftools", "view", "-H", str(path)], check=True, capture_output=True, text=True).stdout


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_killed_impute_leaves_no_output(sig, trained, tmp_path):
    out = tmp_path / "out.vcf.gz"
    proc = _genimpute("impute", TARGET_PHASED, "--model", trained, "--out", out)
    _wait_for(lambda: any(p.name.startswith(".tmp") for p in tmp_path.iterdir()), proc)  # writing has begun
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert not out.exists() and not (tmp_path / "out.vcf.gz.tbi").exists()
    if sig == signal.SIGTERM:  # unwinds: exit 143, one line, temporary file removed
        assert proc.returncode == 143 and err.strip() == "genimpute: terminated"
        assert list(tmp_path.iterdir()) == []
    else:
        assert proc.returncode == -signal.SIGKILL


def _train_args(out):
    steps = ["--steps", "40"]
    tiny = [a for i, a in enumerate(TINY) if TINY[i - 1] != "--steps" and a != "--steps"]
    return ["train", "--ref", PANEL, "--array", ARRAY, "--out", out, *tiny, *steps]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_training_killed_then_resumed_ends_as_an_uninterrupted_run(sig, tmp_path):
    straight = _genimpute(*_train_args(tmp_path / "straight"))
    killed = _genimpute(*_train_args(tmp_path / "killed"))
    _wait_for(lambda: (tmp_path / "killed" / "checkpoint.pt").exists(), killed)
    killed.send_signal(sig)
    killed.communicate()
    if sig == signal.SIGKILL:
        assert not (tmp_path / "killed" / "model.pt").exists()  # it did not get to the end
    else:  # stops at the end of a step, writes what it has, and says how to go on
        assert killed.returncode == 0
        assert load_model_dir(tmp_path / "killed").provenance["finished"] is False
    resumed = _genimpute(*_train_args(tmp_path / "killed"), "--resume")
    for proc in (straight, resumed):
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
    a = load_model_dir(tmp_path / "straight")
    b = load_model_dir(tmp_path / "killed")
    assert a.provenance["steps"] == b.provenance["steps"] == 40
    for name, tensor in a.model.state_dict().items():
        torch.testing.assert_close(b.model.state_dict()[name], tensor, rtol=0, atol=1e-6)


def test_output_is_the_same_for_any_thread_count(trained, tmp_path):
    outputs = []
    for threads in ("1", "2"):
        out = tmp_path / f"t{threads}.vcf.gz"
        proc = _genimpute("impute", TARGET_PHASED, "--model", trained, "--out", out, env={"OMP_NUM_THREADS": threads})
        assert proc.wait(timeout=600) == 0, proc.communicate()
        outputs.append(_records(out))
    assert outputs[0] == outputs[1]


def test_a_sample_is_imputed_the_same_whoever_else_is_in_the_file(trained, tmp_path):
    """Queries are batched in fixed-size passes, so a subset of the targets
    (another batch composition) gets exactly the same genotypes."""
    subset = tmp_path / "subset.vcf.gz"
    run_tool(["bcftools", "view", "-s", "HG00126,HG00177,HG00183", "-Oz", "-o", str(subset), str(TARGET_PHASED)], check=True)
    for target, name in ((TARGET_PHASED, "all"), (subset, "subset")):
        proc = _genimpute("impute", target, "--model", trained, "--out", tmp_path / f"{name}.imputed.vcf.gz")
        assert proc.wait(timeout=600) == 0, proc.communicate()

    def columns(path):  # CHROM..ALT and the subset's sample columns (INFO's AF/DR2 depend on all samples)
        return run_tool(["bcftools", "query", "-s", "HG00126,HG00177,HG00183", "-f", "%CHROM %POS %REF %ALT[ %GT:%DS:%GP]\n",
                               str(path)], check=True, capture_output=True, text=True).stdout

    assert columns(tmp_path / "all.imputed.vcf.gz") == columns(tmp_path / "subset.imputed.vcf.gz")


@pytest.mark.parametrize("interrupt, status, said", [(KeyboardInterrupt, 130, "interrupted"), (None, 143, "terminated")])
def test_a_signal_inside_compiled_code_is_still_a_clean_stop(interrupt, status, said, capsys):
    """A SIGTERM or Ctrl-C that arrives while numba calls back into Python
    surfaces as a SystemError raised from it: the same exit as any other."""
    from genimpute.cli import _run, _Terminated

    def compiled_call():
        try:
            raise (interrupt or _Terminated)()
        except KeyboardInterrupt as exc:
            raise SystemError("CPUDispatcher(...) returned a result with an exception set") from exc

    with pytest.raises(SystemExit) as stop:
        _run(compiled_call)
    assert stop.value.code == status and capsys.readouterr().err == f"genimpute: {said}\n"


def test_an_unrelated_system_error_is_not_taken_for_a_signal():
    from genimpute.cli import _run

    def broken():
        raise SystemError("something else")

    with pytest.raises(SystemError, match="something else"):
        _run(broken)
