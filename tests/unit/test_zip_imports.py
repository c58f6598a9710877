"""Spark's Python processes import pyspark compiled from site-packages (streaming/spark/zip_imports.py)."""
import os
import subprocess
import sys
import sysconfig

import pyspark
import pytest

from streaming.spark.zip_imports import PTH_LINE, PTH_NAME, install_pth, prefer_compiled_pyspark


def _package(site):
    lib = site / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    (lib / "pyspark.zip").write_bytes(b"")
    (lib / "py4j-0.10.9.9-src.zip").write_bytes(b"")
    return str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip")


def test_the_zip_of_the_installed_package_moves_behind_site_packages(tmp_path):
    site = tmp_path / "site-packages"
    zip_path, py4j = _package(site)
    path = [zip_path, py4j, "/usr/lib/python3.11", str(site)]
    assert prefer_compiled_pyspark(path) == [zip_path]
    assert path == [py4j, "/usr/lib/python3.11", str(site), zip_path]


def test_a_symlinked_spark_home_is_the_same_package(tmp_path):
    site = tmp_path / "site-packages"
    _package(site)
    (tmp_path / "opt").mkdir()
    os.symlink(site / "pyspark", tmp_path / "opt" / "spark")      # the image's /opt/spark
    zip_path = str(tmp_path / "opt" / "spark" / "python" / "lib" / "pyspark.zip")
    path = [zip_path, str(site)]
    prefer_compiled_pyspark(path)
    assert path == [str(site), zip_path]


def test_other_spark_homes_keep_their_order(tmp_path):
    dist = tmp_path / "spark-4.0.0-bin" / "python" / "lib"        # a Spark distribution: its own pyspark
    dist.mkdir(parents=True)
    (dist / "pyspark.zip").write_bytes(b"")
    site = tmp_path / "site-packages"
    own_zip, _ = _package(site)
    path = [str(dist / "pyspark.zip"), str(site)]
    assert prefer_compiled_pyspark(path) == [] and path == [str(dist / "pyspark.zip"), str(site)]
    path = [own_zip, "/usr/lib/python3.11"]                         # its site-packages not on the path
    assert prefer_compiled_pyspark(path) == [] and path == [own_zip, "/usr/lib/python3.11"]


def test_install_writes_the_line_once(tmp_path):
    target = install_pth(str(tmp_path))
    assert target == str(tmp_path / PTH_NAME)
    mtime = os.stat(target).st_mtime_ns
    assert install_pth(str(tmp_path)) == target and os.stat(target).st_mtime_ns == mtime
    assert (tmp_path / PTH_NAME).read_text() == PTH_LINE


def test_the_pth_line_is_silent_without_the_project():
    # -I: no site-packages, no current directory: `streaming` cannot be imported.
    done = subprocess.run([sys.executable, "-I", "-c", PTH_LINE], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == ""


def test_this_venv_imports_pyspark_compiled_when_spark_puts_its_zip_first():
    """What Spark does to its Python processes (pyspark.zip first on PYTHONPATH), in the venv
    scripts/bootstrap set up: pyspark must come from site-packages."""
    home = os.path.dirname(pyspark.__file__)
    zip_path = os.path.join(home, "python", "lib", "pyspark.zip")
    if not os.path.isfile(zip_path):
        pytest.fail(f"no {zip_path}: pyspark is not pip-installed here")
    site = sysconfig.get_paths()["purelib"]
    assert os.path.isfile(os.path.join(site, PTH_NAME)), f"{PTH_NAME} missing from {site}: run scripts/bootstrap"
    env = dict(os.environ, PYTHONPATH=zip_path)
    done = subprocess.run([sys.executable, "-c", "import pyspark.sql.datasource as m; print(m.__file__)"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == os.path.join(home, "sql", "datasource.py")
