"""The benchmarks' reuse of earlier outputs: a genimpute output is kept
only if the same code made it (code_version.py, lib.sh's `kept`,
heldout_large_panel.py), and a held-out directory serves one draw."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tools import require

BENCHMARKS = Path(__file__).parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
from code_version import code_version  # noqa: E402
from heldout_large_panel import _claim, _run  # noqa: E402


def test_code_version_follows_the_files_not_the_caches(tmp_path):
    package = tmp_path / "pkg"
    (package / "__pycache__").mkdir(parents=True)
    (package / "engine.py").write_text("RATE = 1\n")
    first = code_version(package)
    (package / "__pycache__" / "engine.cpython-311.pyc").write_bytes(b"compiled")
    assert code_version(package) == first
    (package / "engine.py").write_text("RATE = 2\n")
    assert code_version(package) != first
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.pt").write_bytes(b"weights")
    with_model = code_version(package, (model,))
    assert with_model != code_version(package)
    (model / "model.pt").write_bytes(b"other weights")
    assert code_version(package, (model,)) != with_model


def test_an_output_is_made_again_when_other_code_made_it(tmp_path):
    out, runs = tmp_path / "copying.vcf.gz", tmp_path / "runs"
    # like genimpute, the command refuses to replace an output
    command = [sys.executable, "-c", f"from pathlib import Path; assert not Path({str(out)!r}).exists();"
               f"Path({str(out)!r}).touch(); open({str(runs)!r}, 'a').write('x')"]
    _run(command, out, "genimpute aaaa")
    assert _run(command, out, "genimpute aaaa") == 0.0  # kept
    _run(command, out, "genimpute bbbb")
    assert runs.read_text() == "xx"
    out.with_name(out.name + ".made_by").unlink()  # an output with no record of what made it
    _run(command, out, "genimpute bbbb")
    assert runs.read_text() == "xxx"
    with pytest.raises(SystemExit, match="(?s)making .*copying.vcf.gz failed.*no panel here"):
        _run([sys.executable, "-c", "import sys; sys.exit('no panel here')"], out, "genimpute cccc")


def test_a_held_out_directory_serves_one_draw(tmp_path):
    inputs = {"panel": "/p.vcf.gz", "array": "/a.txt", "held_out": 300, "seed": 2}
    _claim(tmp_path, inputs)
    _claim(tmp_path, dict(inputs))
    with pytest.raises(SystemExit, match="seed.: 2.*expected.*seed.: 3"):
        _claim(tmp_path, {**inputs, "seed": 3})
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / "ref.vcf.gz").touch()
    with pytest.raises(SystemExit, match="before inputs.json"):
        _claim(legacy, inputs)


def test_lib_sh_keeps_a_genimpute_step_only_for_the_same_code(tmp_path):
    require("/usr/bin/time")  # lib.sh's `timed`
    script = f"""
source {BENCHMARKS / 'lib.sh'}
timed step {sys.executable} -c 'print(1)' genimpute > /dev/null
kept step genimpute > /dev/null && echo kept-same
echo 'genimpute 0000000000000000' > step.code
kept step genimpute > /dev/null || echo made-again
kept step beagle > /dev/null || echo not-beagle
timed other true > /dev/null
kept other true > /dev/null && echo kept-other
"""
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["kept-same", "made-again", "not-beagle", "kept-other"]
    assert (tmp_path / "step.code").read_text().split()[0] == "genimpute"
