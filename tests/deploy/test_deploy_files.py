"""The course deployment, checked offline: deploy/kubernetes/ against the
Kubernetes OpenAPI schemas (kubernetes-validate ships them), its probes and resources
against the sandbox's routes and GLASSLLM_* limits, and deploy/compose.yaml and the
Dockerfile against glassllm_service/settings.py. No Docker engine needed: `make docker-test`
runs the real image and the compose deployment."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import yaml
from kubernetes_validate.utils import ValidationError, all_versions, validate
from sandbox_server import ROOT

from glassllm_service.settings import ENV_PREFIX, Settings

K8S = ROOT / "deploy" / "kubernetes"


def _load(path: Path):
    """docker/*.py are scripts, not a package (and `docker` is docker-py's name)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


find_mirror = _load(ROOT / "docker" / "apt_mirror.py").find_mirror
# The oldest release with autoscaling/v2 and policy/v1 that the validator ships, and the
# newest: a course's cluster is somewhere between.
VERSIONS = sorted({all_versions()[0], all_versions()[-1]})
SETTINGS = {f"{ENV_PREFIX}{name.upper()}"
            for name in Settings.model_fields} - {
    f"{ENV_PREFIX}STATIC_DIR",                       # the page ships in the image
    f"{ENV_PREFIX}WHEELHOUSE",                       # so do the wheels /simple/ serves
    f"{ENV_PREFIX}WORKERS"}                          # set by --workers for the workers it starts
# a Secret's business, never a ConfigMap's
SECRETS = {f"{ENV_PREFIX}{n}" for n in ("API_TOKEN", "DATABASE_URL", "COURSE_SECRETS",
                                        "COURSE_SALT")}
# SQLite's directory: the replicas share PostgreSQL instead
MOUNTS = {f"{ENV_PREFIX}DATA_DIR"}


def documents() -> dict[str, dict]:
    docs = {}
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            docs[doc["kind"]] = doc
    return docs


def container() -> dict:
    return documents()["Deployment"]["spec"]["template"]["spec"]["containers"][0]


def quantity(text: str) -> float:
    """A Kubernetes quantity ("1", "500m", "512Mi", "1Gi") as a number (bytes, CPUs)."""
    units = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "": 1}
    number, unit = re.fullmatch(r"([0-9.]+)(m|Ki|Mi|Gi|)", str(text)).groups()
    return float(number) * units[unit]


@pytest.mark.parametrize("version", VERSIONS)
def test_every_manifest_passes_the_kubernetes_schemas_strictly(version):
    docs = documents()
    assert set(docs) == {"ConfigMap", "Deployment", "Service", "HorizontalPodAutoscaler",
                         "PodDisruptionBudget"}
    for doc in docs.values():
        validate(doc, version, strict=True)          # raises ValidationError, naming the path


def test_the_validator_rejects_a_misspelled_field_and_a_wrong_type():
    deployment = documents()["Deployment"]
    probe = deployment["spec"]["template"]["spec"]["containers"][0]
    probe["readinessprobe"] = probe.pop("readinessProbe")
    with pytest.raises(ValidationError, match="'readinessprobe' was unexpected"):
        validate(deployment, VERSIONS[-1], strict=True)
    deployment = documents()["Deployment"]
    deployment["spec"]["replicas"] = "two"
    with pytest.raises(ValidationError, match="'two' is not of type 'integer'"):
        validate(deployment, VERSIONS[-1], strict=True)


def test_probes_use_the_sandbox_routes():
    c = container()
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert c["ports"][0]["containerPort"] == 8000


def test_the_configmap_sets_exactly_the_sandbox_settings_and_they_are_valid(tmp_path):
    data = documents()["ConfigMap"]["data"]
    assert set(data) == SETTINGS - SECRETS - MOUNTS
    values = {k.removeprefix(ENV_PREFIX).lower(): v for k, v in data.items()}
    # the exercise directory is the pod's mount (below); here, a directory that exists
    mounts = {m["mountPath"]: m["name"] for m in container()["volumeMounts"]}
    volumes = {v["name"]: v for v in
               documents()["Deployment"]["spec"]["template"]["spec"]["volumes"]}
    exercises = volumes[mounts[values["exercises_dir"]]]["configMap"]
    assert exercises["optional"] is True          # a course with no exercises yet starts
    assert Settings(**{**values, "exercises_dir": tmp_path}).mode == "course"


def test_the_record_reads_its_secrets_and_fits_postgresqls_connections():
    docs = documents()
    data = docs["ConfigMap"]["data"]
    refs = [e["secretRef"] for e in container()["envFrom"] if "secretRef" in e]
    record = next(r for r in refs if r["name"] == "glassllm-record")
    assert not record.get("optional")            # course mode needs its database
    assert int(data["GLASSLLM_REPLICAS"]) == docs["HorizontalPodAutoscaler"]["spec"][
        "maxReplicas"]
    # replicas x 1 worker x pool, under PostgreSQL's default 100 less 3 reserved and 5 spare
    assert int(data["GLASSLLM_REPLICAS"]) * int(data["GLASSLLM_DB_POOL_SIZE"]) <= 100 - 3 - 5


def test_resources_match_the_limits():
    data = documents()["ConfigMap"]["data"]
    res = container()["resources"]
    cpu = quantity(res["limits"]["cpu"])
    assert cpu == quantity(res["requests"]["cpu"]) == 1          # one worker per pod
    # the sandbox's own default: one compute slot per CPU of the quota (workers ×
    # slots × BLAS threads fit the CPUs; more requests wait in the queue)
    assert int(data["GLASSLLM_MAX_CONCURRENCY"]) == cpu
    # memory: a worker (~80 MiB measured idle) + every concurrent computation at 72 bytes
    # per element of the arrays it may return and hold (GLASSLLM_MAX_ANSWER_ELEMENTS;
    # measured, bench/answer_bounds.py: an expression whose rms_norm is opened, planned
    # just under 12M, peaked 833 MiB above idle; an /api/v1/eval of a 4M output, 711 MiB)
    need = 96 * 2**20 + int(data["GLASSLLM_MAX_CONCURRENCY"]) * 72 * int(
        data["GLASSLLM_MAX_ANSWER_ELEMENTS"])
    assert quantity(res["limits"]["memory"]) >= need
    assert quantity(res["requests"]["memory"]) <= quantity(res["limits"]["memory"])


def test_the_pod_runs_locked_down_like_docker_test():
    spec = documents()["Deployment"]["spec"]["template"]["spec"]
    sc = spec["containers"][0]["securityContext"]
    assert (sc["readOnlyRootFilesystem"], sc["allowPrivilegeEscalation"],
            sc["capabilities"]["drop"]) == (True, False, ["ALL"])
    assert spec["securityContext"]["runAsNonRoot"] is True
    # the only writable place is /tmp; the course's exercises come in read-only
    assert spec["containers"][0]["volumeMounts"] == [
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "exercises", "mountPath": "/exercises", "readOnly": True}]
    assert "args" not in spec["containers"][0] and "command" not in spec["containers"][0]


def test_the_service_and_autoscaler_point_at_the_deployment():
    docs = documents()
    labels = docs["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert docs["Service"]["spec"]["selector"] == labels
    assert docs["Service"]["spec"]["ports"][0]["targetPort"] == "http"
    target = docs["HorizontalPodAutoscaler"]["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", docs["Deployment"]["metadata"]
                                                ["name"])
    assert docs["HorizontalPodAutoscaler"]["spec"]["minReplicas"] >= 2


def test_compose_passes_every_setting_through_and_sets_limits():
    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
    sandbox = compose["services"]["sandbox"]
    assert {e.split("=", 1)[0] for e in sandbox["environment"]} == SETTINGS
    assert sandbox["read_only"] is True and sandbox["cap_drop"] == ["ALL"]
    assert "postgresql://" in next(e for e in sandbox["environment"]
                                   if e.startswith("GLASSLLM_DATABASE_URL="))
    assert sandbox["depends_on"]["postgres"]["condition"] == "service_healthy"
    postgres = compose["services"]["postgres"]
    assert postgres["read_only"] is True and postgres["cap_drop"] == ["ALL"]
    assert postgres["build"]["context"] == "postgres" and "record" in compose["volumes"]
    assert sandbox["tmpfs"] == ["/tmp"]
    assert set(sandbox["deploy"]["resources"]["limits"]) == {"cpus", "memory"}
    assert "/readyz" in " ".join(sandbox["healthcheck"]["test"])
    proxy = compose["services"]["proxy"]
    assert proxy["depends_on"]["sandbox"]["condition"] == "service_healthy"
    assert proxy["build"]["context"] == "nginx"
    nginx = (ROOT / "deploy" / "nginx" / "nginx.conf").read_text()
    assert "server sandbox:8000" in nginx and "client_max_body_size 8m;" in nginx
    assert Settings.model_fields["max_body_bytes"].default == 8 * 2**20


# --- the local base's mirror comes from the machine's apt sources ------------------------

def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


OS_RELEASE = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nVERSION_CODENAME=bookworm\n'


def test_mirror_from_a_deb822_sources_file(tmp_path):
    root = write(tmp_path, {"etc/os-release": OS_RELEASE,
                            "etc/apt/sources.list.d/debian.sources": (
        "Types: deb\nURIs: http://mirror.test/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\n\n"
        "Types: deb\nURIs: http://mirror.test/debian-security\nSuites: bookworm-security\n"
        "Components: main\n")})
    assert find_mirror(root) == ("http://mirror.test/debian", "bookworm")


def test_mirror_from_a_one_line_list_skipping_others(tmp_path):
    root = write(tmp_path, {"etc/os-release": OS_RELEASE, "etc/apt/sources.list": (
        "# a comment\n"
        "deb-src http://src.test/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/k.gpg] http://other.test/x nodistro main\n"
        "deb [signed-by=/k.gpg] http://mirror.test/debian bookworm main contrib\n")})
    assert find_mirror(root) == ("http://mirror.test/debian", "bookworm")


def test_mirror_skips_a_disabled_stanza_and_names_the_files_when_none_fits(tmp_path):
    root = write(tmp_path, {"etc/os-release": OS_RELEASE,
                            "etc/apt/sources.list.d/debian.sources": (
        "Enabled: no\nTypes: deb\nURIs: http://off.test/debian\nSuites: bookworm\n"
        "Components: main\n"),
                            "etc/apt/sources.list.d/x.list.disabled":
        "deb http://disabled.test/debian bookworm main\n"})
    with pytest.raises(SystemExit, match=r"no 'deb' entry for bookworm main in .*debian\.sources"):
        find_mirror(root)


def test_no_mirror_host_is_written_in_the_repository():
    hosts = ("deb.debian.org", "ftp.debian.org", "snapshot.debian.org", "security.debian.org")
    for path in [ROOT / "Dockerfile", *ROOT.glob("docker/*"), *ROOT.glob("deploy/**/*")]:
        if path.is_file():
            text = path.read_text()
            assert not any(h in text for h in hosts), f"{path} names a mirror"
