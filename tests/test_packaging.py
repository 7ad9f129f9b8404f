"""The wheel carries templates/ inside the package, and jobgen renders from it.

An editable install imports from src/ and finds the repository's templates/ (every other
test runs that way); this test builds the real wheel and renders from its contents alone.
"""

import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from jobgen.compiler import pipeline

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_ships_templates_and_renders_from_them(tmp_path: Path) -> None:
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(ROOT)],
        capture_output=True, text=True, timeout=300,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = (tmp_path / "dist").glob("jobgen-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    templates = sorted(n for n in names if n.startswith("jobgen/templates/"))
    assert templates == sorted(f"jobgen/templates/{p.name}" for p in (ROOT / "templates").iterdir())
    # and compiled (hatch_build.py, compiler/precompiled.py): one module per template and the stamp
    compiled = sorted(n for n in names if n.startswith("jobgen/_templates/"))
    assert len(compiled) == len(templates) + 1 and "jobgen/_templates/SOURCES" in compiled
    zipfile.ZipFile(wheel).extractall(tmp_path / "site")
    out = tmp_path / "out"
    # -S: no site module, so the editable install's .pth finder is not loaded; the wheel's
    # contents come first on the path, the venv's site-packages only supply jinja2 & co.
    deps = sysconfig.get_paths()["purelib"]
    code = (
        f"import sys; sys.path[:0] = [{str(tmp_path / 'site')!r}, {deps!r}]; "
        "import pathlib; from jobgen.compiler import render; "
        "assert render.template_dir() == pathlib.Path(render.__file__).resolve().parents[1] / 'templates', render.template_dir(); "
        "assert 'site' in render.__file__, render.__file__; "
        # the compiled templates, run without jinja2: importing it would fail here
        "from jobgen.compiler import precompiled; assert isinstance(render._templates(), precompiled.Templates); "
        "sys.modules['jinja2'] = None; "
        "from jobgen.cli import main; sys.argv = ['jobgen'] + sys.argv[1:]; main()"
    )
    r = subprocess.run(
        [sys.executable, "-S", "-c", code, "render", str(ROOT / "examples" / "shop.yaml"), "-o", str(out)],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    expected = pipeline.build(str(ROOT / "examples" / "shop.yaml")).files
    assert {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()} == expected
    # The generator's miss path, the boot's: it compiles with the wheel's templates, no jinja2.
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "shop.yaml").write_bytes((ROOT / "examples" / "shop.yaml").read_bytes())
    gen = (
        f"import sys; sys.path[:0] = [{str(tmp_path / 'site')!r}, {deps!r}]; sys.modules['jinja2'] = None; "
        "from jobgen.cli.generator import main; sys.argv = ['jobgen-generator'] + sys.argv[1:]\n"
        # nor OpenSSL (contract/digest.py) nor dataclasses (tests/test_imports.py)
        "try: main()\nfinally: print(sorted({'_hashlib', 'dataclasses', 'jinja2.environment'} & set(sys.modules)))"
    )
    env = {"PATH": "/usr/bin:/bin", "JOBGEN_MANIFEST_DIRS": str(manifests), "JOBGEN_GENERATOR_CACHE": ""}
    g = subprocess.run([sys.executable, "-S", "-c", gen, str(tmp_path / "gen")], capture_output=True, text=True, timeout=60, env=env)
    assert (g.returncode, g.stderr, g.stdout) == (0, "", "[]\n")
    # render's bytes, then the generator's own [Unit] section (host/generator.py)
    for name in ("sales-report.service", "sales-report.timer"):
        generated = (tmp_path / "gen" / name).read_bytes()
        assert generated.startswith(expected[name]), name
        assert f"\n[Unit]\nSourcePath={manifests / 'shop.yaml'}\n".encode() in generated[len(expected[name]):], name
