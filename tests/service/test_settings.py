"""Settings (SPEC H5): every limit is bounded, and a bad GLASSLLM_* variable stops the
sandbox at startup with a message naming the variable, the value and the rule — never a
sandbox that starts and then refuses everything (GLASSLLM_MAX_CONCURRENCY=0: every
request 503 while /readyz said ready, capacity 0)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from sandbox_server import ROOT

from glassllm_service.app import create_app
from glassllm_service.settings import GiB, Settings, SettingsError


@pytest.mark.parametrize("name,value,rule", [
    ("MAX_CONCURRENCY", "0", "greater than or equal to 1"),
    ("MAX_CONCURRENCY", "-3", "greater than or equal to 1"),
    ("MAX_CONCURRENCY", "100000", "less than or equal to 1024"),
    ("MAX_BODY_BYTES", "0", "greater than or equal to 1"),
    ("MAX_BODY_BYTES", "8MiB", "valid integer"),
    ("MAX_JSON_DEPTH", "1", "greater than or equal to 2"),
    ("MAX_ARRAY_ELEMENTS", "0", "greater than or equal to 1"),
    ("MAX_RESULT_ELEMENTS", "-1", "greater than or equal to 1"),
    ("MAX_MATMUL_MADDS", "0", "greater than or equal to 1"),
    ("RETRY_AFTER_SECONDS", "0", "greater than or equal to 1"),
    ("MAX_EXPRESSION_LENGTH", "0", "greater than or equal to 1"),
    ("MAX_CHECK_ELEMENTS", "-1", "greater than or equal to 0"),
    ("STATIC_DIR", "/nonexistent", "holds no index.html"),
    ("MAX_QUEUE", "-1", "greater than or equal to 0"),          # the admission's settings
    ("QUEUE_TIMEOUT_S", "0", "greater than 0"),
    ("QUEUE_TIMEOUT_S", "soon", "valid number"),
    ("LARGE_COST", "0", "greater than or equal to 1"),
    ("BLAS_THREADS", "0", "greater than or equal to 1"),
    ("WORKERS", "0", "greater than or equal to 1"),
    ("LOG_FORMAT", "xml", "'plain' or 'json'"),
    ("METRICS", "maybe", "valid boolean"),
    ("ACCESS_LOG", "maybe", "valid boolean"),
])
def test_a_bad_variable_is_refused_by_name(monkeypatch, name, value, rule):
    monkeypatch.setenv(f"GLASSLLM_{name}", value)
    with pytest.raises(SettingsError) as err:
        create_app()
    assert f"GLASSLLM_{name}={value!r}" in str(err.value) and rule in str(err.value)


def test_every_bad_variable_is_named_at_once(monkeypatch):
    monkeypatch.setenv("GLASSLLM_MAX_CONCURRENCY", "0")
    monkeypatch.setenv("GLASSLLM_MAX_BODY_BYTES", "0")
    with pytest.raises(SettingsError, match=r"MAX_BODY_BYTES='0'.*MAX_CONCURRENCY='0'"):
        Settings()


def test_good_values_and_the_edges_of_the_ranges_pass(monkeypatch):
    monkeypatch.setenv("GLASSLLM_MAX_CONCURRENCY", "1")
    monkeypatch.setenv("GLASSLLM_MAX_CHECK_ELEMENTS", "0")           # 0: check refused
    s = Settings(max_json_depth=2)
    assert (s.max_concurrency, s.max_check_elements, s.max_json_depth) == (1, 0, 2)
    assert Settings().max_body_bytes == 8 * 1024 * 1024


def test_the_console_script_exits_at_startup_naming_the_variable():
    env = {"GLASSLLM_MAX_CONCURRENCY": "0", "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-m", "glassllm_service.sandbox_cli",
                        "--port", "1"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert r.stderr.strip() == ("glassllm-sandbox: invalid settings: GLASSLLM_MAX_CONCURRENCY="
                                "'0': Input should be greater than or equal to 1")


# --------------------------------------------------------------------------------------
# the console script's own options (QA pass 3, defect 5)
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("option,value,message", [
    # 70000 printed "running on :70000" while the OS bound 70000 % 65536 = 4464
    ("--port", "70000", "argument --port: must be a TCP port from 1 to 65535, got '70000'"),
    ("--port", "65536", "argument --port: must be a TCP port from 1 to 65535, got '65536'"),
    ("--port", "0", "argument --port: must be a TCP port from 1 to 65535, got '0'"),
    ("--port", "-1", "argument --port: must be a TCP port from 1 to 65535, got '-1'"),
    ("--port", "http", "argument --port: must be a TCP port from 1 to 65535, got 'http'"),
    ("--workers", "0", "argument --workers: must be a positive integer or 'auto', got '0'"),
    ("--workers", "-1", "argument --workers: must be a positive integer or 'auto', got '-1'"),
    ("--workers", "many", "argument --workers: must be a positive integer or 'auto', got"
                          " 'many'"),
    ("--log-level", "bogus", "argument --log-level: invalid choice: 'bogus' (choose from"
                             " 'critical', 'error', 'warning', 'info', 'debug', 'trace')"),
])
def test_the_console_script_refuses_bad_options_with_exit_2(capsys, monkeypatch, option,
                                                             value, message):
    import uvicorn

    from glassllm_service import sandbox_cli as cli

    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: pytest.fail("uvicorn was started"))
    with pytest.raises(SystemExit) as exit_info:
        cli.main([option, value])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == f"glassllm-sandbox: error: {message}"


def test_the_console_script_passes_good_options_to_uvicorn(monkeypatch):
    import uvicorn
    import uvicorn.config

    from glassllm_service import sandbox_cli as cli

    assert tuple(uvicorn.config.LOG_LEVELS) == cli.LOG_LEVELS     # the names uvicorn knows
    seen = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: seen.update(kw))
    cli.main(["--port", "65535", "--workers", "3", "--log-level", "trace"])
    assert (seen["port"], seen["workers"], seen["log_level"]) == (65535, 3, "trace")
    cli.main(["--port", "1"])
    assert (seen["port"], seen["workers"], seen["log_level"]) == (1, 1, "info")


def test_workers_auto_is_one_per_available_cpu(monkeypatch):
    """--workers auto; each worker learns the count (its share of the slots) and,
    with several, the metrics directory; the caller's environment is restored after."""

    import uvicorn

    from glassllm_service import cpus
    from glassllm_service import sandbox_cli as cli

    monkeypatch.setattr(cpus, "available_cpus", lambda: 3)
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    seen = {}

    def run(app, **kw):
        seen.update(kw, env=os.environ.get("GLASSLLM_WORKERS"),
                    multiproc=os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
        seen["slots"] = Settings(max_concurrency=None).workers

    monkeypatch.setattr(uvicorn, "run", run)
    cli.main(["--workers", "auto"])
    assert (seen["workers"], seen["env"], seen["slots"]) == (3, "3", 3)
    assert seen["multiproc"] and not os.path.exists(seen["multiproc"])    # removed after
    assert "GLASSLLM_WORKERS" not in os.environ
    assert "PROMETHEUS_MULTIPROC_DIR" not in os.environ


def test_compute_slots_are_the_cpus_shared_by_the_workers(monkeypatch):
    from glassllm_service import cpus
    monkeypatch.setattr(cpus, "available_cpus", lambda: 8)
    assert Settings().compute_slots == 8
    assert Settings(workers=4).compute_slots == 2
    assert Settings(workers=16).compute_slots == 1
    assert Settings(workers=4, max_concurrency=5).compute_slots == 5


def test_available_cpus_reads_the_cgroup_quota(tmp_path):
    from glassllm_service.cpus import available_cpus
    affinity = len(os.sched_getaffinity(0))
    (tmp_path / "cpu.max").write_text("150000 100000\n")        # 1.5 CPUs → 2
    assert available_cpus(tmp_path) == min(affinity, 2)
    (tmp_path / "cpu.max").write_text("50000 100000\n")         # 0.5 CPU → 1
    assert available_cpus(tmp_path) == 1
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert available_cpus(tmp_path) == affinity


@pytest.mark.parametrize("field,top", [("max_body_bytes", GiB), ("max_array_elements", 10**9),
                                       ("max_result_elements", 10**10),
                                       ("max_matmul_madds", 10**15), ("max_concurrency", 1024),
                                       ("retry_after_seconds", 3600),
                                       ("max_expression_length", 1_000_000)])
def test_each_limit_accepts_its_top_value_and_refuses_one_more_by_name(field, top):
    assert getattr(Settings(**{field: top}), field) == top
    with pytest.raises(SettingsError) as err:
        Settings(**{field: top + 1})
    assert str(err.value) == (f"invalid settings: GLASSLLM_{field.upper()}={top + 1!r}:"
                              f" Input should be less than or equal to {top}")


def test_every_bad_setting_is_listed_separated_by_semicolons():
    with pytest.raises(SettingsError) as err:
        Settings(max_body_bytes=0, max_json_depth=1)
    assert str(err.value) == (
        "invalid settings: GLASSLLM_MAX_BODY_BYTES=0: Input should be greater than or equal"
        " to 1; GLASSLLM_MAX_JSON_DEPTH=1: Input should be greater than or equal to 2")
