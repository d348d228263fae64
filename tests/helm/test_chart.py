"""The Helm chart, linted and rendered in-process (helm-python-sdk), every manifest
checked against the Kubernetes schemas (kubernetes-validate, offline), and the rendered
ConfigMaps parsed with the project's own settings models."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

from lakefs_core.config import SERVER_CONFIG_FILE_ENV, ConfigError, load_server_config
from replication.config import REPLICATION_CONFIG_FILE_ENV, load_replication_config
from replication.sidecar import refstore_database

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART = REPO_ROOT / "helm" / "lakefs-mirror"
REGION_VALUES = {
    "us-east-1": REPO_ROOT / "config" / "helm" / "values-us-east-1.yaml",
    "us-west-2": REPO_ROOT / "config" / "helm" / "values-us-west-2.yaml",
}
BAD_VALUES = Path(__file__).with_name("bad-values.yaml")
KUBE_VERSION = "1.30"
NAMESPACE = "mirroring"
# What the replication Kubernetes secret puts into the sidecar's environment.
REPLICATION_SECRET_ENV = {
    "source_lakefs_access_key_id": "AKIAREPLICATOR",
    "source_lakefs_secret_access_key": "replicator-secret",
    "auth_encrypt_secret_key": "<shared-secret>",
}
DATABASE_DSN = "postgres://lakefs:pw@db.internal:5432/lakefs"
# The whole environment of each pod of the region values: its secrets' keys.
REPLICATION_POD_ENV = {
    **REPLICATION_SECRET_ENV,
    "REPLICATION_REFSTORE_DATABASE_POSTGRES_CONNECTION_STRING": DATABASE_DSN,
}
SERVER_POD_ENV = {
    "LAKEFS_AUTH_ENCRYPT_SECRET_KEY": "<shared-secret>",
    "LAKEFS_DATABASE_POSTGRES_CONNECTION_STRING": DATABASE_DSN,
}


@pytest.fixture(scope="module", autouse=True)
def quiet_helm() -> Iterator[None]:
    helm.disable_logging()  # template `fail` calls are logged by the library otherwise
    yield


@pytest.fixture(scope="module")
def chart() -> Iterator[helm.Chart]:
    with helm.Chart.load(CHART) as loaded:
        yield loaded


def load_values(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data


def render(
    chart: helm.Chart, values: dict[str, Any] | None, release: str = "lakefs-source"
) -> list[dict[str, Any]]:
    """Every Kubernetes object of the rendered chart (NOTES.txt left out)."""
    objects: list[dict[str, Any]] = []
    for name, text in sorted(chart.render(values, name=release, namespace=NAMESPACE).items()):
        if name.endswith("NOTES.txt"):
            continue
        objects += [doc for doc in yaml.safe_load_all(text) if doc]
    return objects


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    matches = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind} {name}, got {len(matches)}"
    return matches[0]


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    result: dict[str, Any] = containers[0]
    return result


def env_of(c: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in c.get("env", [])}


def config_file(deployment: dict[str, Any], env_name: str) -> tuple[str, str]:
    """(ConfigMap name, key) that the file named by ``env_name`` is mounted from."""
    c = container(deployment)
    path = env_of(c)[env_name]["value"]
    mount_dir, _, key = path.rpartition("/")
    mount = next(m for m in c["volumeMounts"] if m["mountPath"] == mount_dir)
    volume = next(
        v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"]
    )
    return volume["configMap"]["name"], key


def validate_all(objects: list[dict[str, Any]]) -> None:
    assert objects
    for obj in objects:
        kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)


def lint(values: dict[str, Any] | None) -> dict[str, Any]:
    report: dict[str, Any] = helm.lint(
        CHART, values, strict=True, kube_version=f"v{KUBE_VERSION}.0"
    )
    return report


def serious(report: dict[str, Any]) -> list[str]:
    """Lint findings that strict mode fails on (warnings and errors)."""
    return [m["error"] for m in report["messages"] if m["severity"] >= 2] + report["errors"]


def write_config(tmp_path: Path, configmap: dict[str, Any], key: str) -> Path:
    path = tmp_path / f"{configmap['metadata']['name']}-{key}"
    path.write_text(configmap["data"][key], encoding="utf-8")
    return path


# --- lint -----------------------------------------------------------------------------
def test_lint_strict_defaults() -> None:
    report = lint(None)
    assert report["total_charts_linted"] == 1
    assert serious(report) == []


@pytest.mark.parametrize("region", sorted(REGION_VALUES))
def test_lint_strict_region_values(region: str) -> None:
    assert serious(lint(load_values(REGION_VALUES[region]))) == []


# --- defaults -------------------------------------------------------------------------
def test_defaults_render_the_server_alone(chart: helm.Chart, tmp_path: Path) -> None:
    objects = render(chart, None)
    validate_all(objects)
    assert sorted((o["kind"], o["metadata"]["name"]) for o in objects) == [
        ("ConfigMap", "lakefs-source-lakefs-mirror"),
        ("Deployment", "lakefs-source-lakefs-mirror"),
        ("Service", "lakefs-source-lakefs-mirror"),
    ]
    deployment = find(objects, "Deployment", "lakefs-source-lakefs-mirror")
    server = container(deployment)
    assert server["command"] == ["lakefs-core", "run"]
    assert server["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    for probe in ("livenessProbe", "readinessProbe"):
        assert server[probe]["httpGet"] == {"path": "/_health", "port": "http"}
    assert server["resources"]["requests"]

    cm_name, key = config_file(deployment, SERVER_CONFIG_FILE_ENV)
    configmap = find(objects, "ConfigMap", cm_name)
    cfg = load_server_config(write_config(tmp_path, configmap, key), env={})
    assert cfg.listen_address == "0.0.0.0:8000"
    assert cfg.data_dir == "/var/lib/lakefs-mirror"
    assert cfg.database.type == "local"
    assert cfg.database.local.path == "/var/lib/lakefs-mirror/metadata.db"
    data_mount = next(m for m in server["volumeMounts"] if m["name"] == "data")
    assert data_mount["mountPath"] == cfg.data_dir

    service = find(objects, "Service", "lakefs-source-lakefs-mirror")
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]


def test_gs_blockstore_values_reach_the_server(chart: helm.Chart, tmp_path: Path) -> None:
    gs = {"credentials_file": "/etc/gcs/key.json", "pre_signed_expiry": "30m"}
    objects = render(chart, {"config": {"blockstore": {"type": "gs", "gs": gs}}})
    deployment = find(objects, "Deployment", "lakefs-source-lakefs-mirror")
    cm_name, key = config_file(deployment, SERVER_CONFIG_FILE_ENV)
    cfg = load_server_config(write_config(tmp_path, find(objects, "ConfigMap", cm_name), key),
                             env={})
    assert cfg.blockstore is not None and cfg.blockstore.gs is not None
    assert cfg.blockstore.gs.credentials_file == "/etc/gcs/key.json"
    assert cfg.blockstore.gs.pre_signed_expiry.total_seconds() == 1800
    with pytest.raises(helm.HelmValuesError, match="type"):
        render(chart, {"config": {"blockstore": {"type": "azure-files"}}})


def test_chart_created_secret_feeds_the_server(chart: helm.Chart) -> None:
    objects = render(
        chart,
        {
            "secrets": {
                "authEncryptSecretKey": "s3cr3t",
                "databaseConnectionString": "postgres://lakefs:pw@db:5432/lakefs",
            },
            "config": {"database": {"type": "postgres"}},
        },
    )
    validate_all(objects)
    secret = find(objects, "Secret", "lakefs-source-lakefs-mirror")
    assert secret["stringData"] == {
        "auth_encrypt_secret_key": "s3cr3t",
        "database_connection_string": "postgres://lakefs:pw@db:5432/lakefs",
    }
    env = env_of(container(find(objects, "Deployment", "lakefs-source-lakefs-mirror")))
    ref = env["LAKEFS_AUTH_ENCRYPT_SECRET_KEY"]["valueFrom"]["secretKeyRef"]
    assert (ref["name"], ref["key"]) == ("lakefs-source-lakefs-mirror", "auth_encrypt_secret_key")
    ref = env["LAKEFS_DATABASE_POSTGRES_CONNECTION_STRING"]["valueFrom"]["secretKeyRef"]
    assert ref["key"] == "database_connection_string"


def test_server_workers_reach_the_config_and_are_checked(chart: helm.Chart,
                                                        tmp_path: Path) -> None:
    objects = render(chart, {"config": {"workers": 3}})
    deployment = find(objects, "Deployment", "lakefs-source-lakefs-mirror")
    cm_name, key = config_file(deployment, SERVER_CONFIG_FILE_ENV)
    path = write_config(tmp_path, find(objects, "ConfigMap", cm_name), key)
    assert load_server_config(path, env={}).workers == 3
    with pytest.raises(helm.HelmValuesError, match="workers"):
        chart.render({"config": {"workers": 0}}, name="lakefs-source", namespace=NAMESPACE)


# --- the seed's two-region values -----------------------------------------------------
@pytest.mark.parametrize("region", sorted(REGION_VALUES))
def test_region_values_render_server_and_replication(
    chart: helm.Chart, region: str, tmp_path: Path
) -> None:
    values = load_values(REGION_VALUES[region])
    seed = values["replication"]
    objects = render(chart, values)
    validate_all(objects)
    full = "lakefs-source-lakefs-mirror"
    rep_name = f"{full}-replication"
    assert {(o["kind"], o["metadata"]["name"]) for o in objects} == {
        ("ConfigMap", full),
        ("Deployment", full),
        ("Service", full),
        ("ConfigMap", rep_name),
        ("Deployment", rep_name),
        ("Service", rep_name),
    }

    # the replication Deployment, as the seed's values block describes it
    rep_deployment = find(objects, "Deployment", rep_name)
    pod = rep_deployment["spec"]["template"]["spec"]
    sidecar = container(rep_deployment)
    assert pod["serviceAccountName"] == seed["serviceAccountName"]
    assert sidecar["image"] == f"{seed['image']['repository']}:{seed['image']['tag']}"
    assert sidecar["command"] == ["lakefs-replication", "run"]
    assert sidecar["envFrom"] == [{"secretRef": {"name": seed["extraEnvVarsSecret"]}}]
    assert sidecar["ports"] == [{"name": "http", "containerPort": 8008, "protocol": "TCP"}]
    rep_service = find(objects, "Service", rep_name)
    assert rep_service["spec"]["ports"][0]["port"] == 8008
    assert rep_service["spec"]["selector"] == rep_deployment["spec"]["selector"]["matchLabels"]
    server_deployment = find(objects, "Deployment", full)
    assert rep_service["spec"]["selector"] != server_deployment["spec"]["selector"]["matchLabels"]

    # the sidecar's ConfigMap parses with the replication settings, with the
    # environment the pod gets from the replication secret and the server secret
    cm_name, key = config_file(rep_deployment, REPLICATION_CONFIG_FILE_ENV)
    assert cm_name == rep_name
    rep_env = env_of(sidecar)
    refstore_ref = rep_env["REPLICATION_REFSTORE_DATABASE_POSTGRES_CONNECTION_STRING"]
    assert refstore_ref["valueFrom"]["secretKeyRef"]["name"] == values["existingSecret"]
    path = write_config(tmp_path, find(objects, "ConfigMap", cm_name), key)
    cfg = load_replication_config(path, env=REPLICATION_POD_ENV)
    want = seed["config"]
    assert cfg.region == region == want["region"]
    assert cfg.organization_id == want["organization_id"]
    assert cfg.regional_endpoint == want["regional_endpoint"]
    assert cfg.dst_endpoints == want["dst_endpoints"]
    mirrors = cfg.mirrors_database.to_dict()
    assert mirrors["type"] == want["mirrors_database"]["type"] == "dynamodb"
    assert mirrors["dynamodb"] == want["mirrors_database"]["dynamodb"]
    assert cfg.blockstore is not None and cfg.blockstore.s3 is not None
    assert cfg.blockstore.s3.region == want["blockstore"]["s3"]["region"] == region
    assert cfg.auth.encrypt.secret_key.get_secret_value() == "<shared-secret>"
    assert cfg.logging.level == want["logging"]["level"]
    assert cfg.listen_address == "0.0.0.0:8008"
    assert cfg.refstore_database is not None and cfg.refstore_database.type == "postgres"
    assert cfg.source_lakefs.access_key_id.get_secret_value() == "AKIAREPLICATOR"

    # the server's ConfigMap parses with the server settings and its
    # /service/replication/ proxy points at the replication Service
    cm_name, key = config_file(server_deployment, SERVER_CONFIG_FILE_ENV)
    server_path = write_config(tmp_path, find(objects, "ConfigMap", cm_name), key)
    server_env = env_of(container(server_deployment))
    for var in ("LAKEFS_AUTH_ENCRYPT_SECRET_KEY", "LAKEFS_DATABASE_POSTGRES_CONNECTION_STRING"):
        assert server_env[var]["valueFrom"]["secretKeyRef"]["name"] == values["existingSecret"]
    with pytest.raises(ConfigError) as err:  # the secret is what makes it complete
        load_server_config(server_path, env={})
    assert "database.postgres.connection_string" in err.value.fields
    server_cfg = load_server_config(server_path, env=SERVER_POD_ENV)
    assert server_cfg.blockstore is not None and server_cfg.blockstore.s3 is not None
    assert server_cfg.blockstore.s3.region == region
    assert server_cfg.replication.endpoint == (
        f"http://{rep_name}.{NAMESPACE}.svc.cluster.local:8008"
    )


def test_replication_defaults_come_from_the_release(chart: helm.Chart, tmp_path: Path) -> None:
    """Unset regional_endpoint and blockstore are taken from this release's server."""
    values = load_values(REGION_VALUES["us-east-1"])
    rep_config = values["replication"]["config"]
    del rep_config["regional_endpoint"], rep_config["blockstore"]
    values["replication"]["port"] = 9008
    objects = render(chart, values)
    validate_all(objects)
    rep_name = "lakefs-source-lakefs-mirror-replication"
    path = write_config(tmp_path, find(objects, "ConfigMap", rep_name), "config.yaml")
    cfg = load_replication_config(path, env=REPLICATION_POD_ENV)
    assert cfg.regional_endpoint == (
        f"http://lakefs-source-lakefs-mirror.{NAMESPACE}.svc.cluster.local:80"
    )
    server_configmap = find(objects, "ConfigMap", "lakefs-source-lakefs-mirror")
    server_path = write_config(tmp_path, server_configmap, "config.yaml")
    assert cfg.blockstore == load_server_config(server_path, env=SERVER_POD_ENV).blockstore
    assert cfg.listen_address == "0.0.0.0:9008"
    assert find(objects, "Service", rep_name)["spec"]["ports"][0]["port"] == 9008


def test_notes_tell_how_to_reach_the_api_and_create_a_mirror(chart: helm.Chart) -> None:
    notes = chart.render(
        load_values(REGION_VALUES["us-east-1"]), name="lakefs-source", namespace=NAMESPACE
    )["lakefs-mirror/templates/NOTES.txt"]
    assert "port-forward svc/lakefs-source-lakefs-mirror" in notes
    assert "/service/replication/v1/repositories/<SOURCE_REPO>/mirrors" in notes
    assert '"storage_namespace"' in notes
    default_notes = chart.render(None, name="x", namespace=NAMESPACE)
    assert "Replication is disabled" in default_notes["lakefs-mirror/templates/NOTES.txt"]


# --- metadata on DynamoDB -------------------------------------------------------------
DYNAMODB = {
    "table_name": "lakefs-metadata",
    "aws_region": "us-east-1",
    "endpoint": "http://dynamodb.internal:8000",
    "scan_limit": 500,
    "read_capacity_units": 20,
    "write_capacity_units": 10,
}
#: the server Secret of a DynamoDB installation, under the chart's default key names
DYNAMODB_SECRET = {
    "auth_encrypt_secret_key": "<shared-secret>",
    "dynamodb_aws_access_key_id": "AKIATABLEACCESS",
    "dynamodb_aws_secret_access_key": "table-secret",
}


#: what the pod's fields are in :func:`pod_env`
POD_FIELDS = {"status.podIP": "10.1.2.3"}


def pod_env(c: dict[str, Any], secrets: dict[str, dict[str, str]]) -> dict[str, str]:
    """The environment Kubernetes gives container ``c`` when ``secrets`` (name -> data)
    exist: plain values, optional keys a Secret lacks left out, then envFrom."""
    env: dict[str, str] = {}
    for source in c.get("envFrom", []):
        env.update(secrets[source["secretRef"]["name"]])
    for var in c.get("env", []):
        if "value" in var:  # $(NAME) is a variable defined before, as Kubernetes does
            env[var["name"]] = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                                      lambda m: env.get(m[1], m[0]), var["value"])
            continue
        if "fieldRef" in var["valueFrom"]:
            env[var["name"]] = POD_FIELDS[var["valueFrom"]["fieldRef"]["fieldPath"]]
            continue
        ref = var["valueFrom"]["secretKeyRef"]
        data = secrets.get(ref["name"], {})
        if ref["key"] in data:
            env[var["name"]] = data[ref["key"]]
        else:
            assert ref.get("optional"), f"{var['name']}: {ref['name']} has no {ref['key']}"
    return env


def dynamodb_values() -> dict[str, Any]:
    values = load_values(REGION_VALUES["us-east-1"])
    values["config"]["database"] = {"type": "dynamodb", "dynamodb": dict(DYNAMODB)}
    values["replicaCount"] = 3
    return values


def test_dynamodb_values_lint_strict() -> None:
    assert serious(lint(dynamodb_values())) == []


def test_dynamodb_server_and_replication_open_one_table(chart: helm.Chart,
                                                        tmp_path: Path) -> None:
    values = dynamodb_values()
    objects = render(chart, values)
    validate_all(objects)
    full = "lakefs-source-lakefs-mirror"
    secrets = {values["existingSecret"]: DYNAMODB_SECRET,
               values["replication"]["extraEnvVarsSecret"]: REPLICATION_SECRET_ENV}

    # the server: several pods share the table, its AWS keys come from the Secret
    server_deployment = find(objects, "Deployment", full)
    assert server_deployment["spec"]["replicas"] == 3
    server = container(server_deployment)
    ref = env_of(server)["LAKEFS_DATABASE_DYNAMODB_AWS_SECRET_ACCESS_KEY"]["valueFrom"]
    assert ref["secretKeyRef"] == {"name": "lakefs-secrets",
                                   "key": "dynamodb_aws_secret_access_key", "optional": True}
    cm_name, key = config_file(server_deployment, SERVER_CONFIG_FILE_ENV)
    server_path = write_config(tmp_path, find(objects, "ConfigMap", cm_name), key)
    assert "table-secret" not in server_path.read_text(encoding="utf-8")
    server_env = pod_env(server, secrets)
    del server_env[SERVER_CONFIG_FILE_ENV]
    server_db = load_server_config(server_path, env=server_env).database
    assert server_db.type == "dynamodb"
    ddb = server_db.dynamodb
    assert (ddb.table_name, ddb.aws_region, ddb.endpoint, ddb.scan_limit) == (
        "lakefs-metadata", "us-east-1", "http://dynamodb.internal:8000", 500)
    assert (ddb.read_capacity_units, ddb.write_capacity_units) == (20, 10)
    assert ddb.aws_access_key_id == "AKIATABLEACCESS"
    assert ddb.aws_secret_access_key is not None
    assert ddb.aws_secret_access_key.get_secret_value() == "table-secret"

    # the replication service: the same table, with the same keys, as its refstore
    rep_deployment = find(objects, "Deployment", f"{full}-replication")
    sidecar = container(rep_deployment)
    ref = env_of(sidecar)["REPLICATION_REFSTORE_DATABASE_DYNAMODB_AWS_SECRET_ACCESS_KEY"]
    assert ref["valueFrom"]["secretKeyRef"]["name"] == "lakefs-secrets"
    cm_name, key = config_file(rep_deployment, REPLICATION_CONFIG_FILE_ENV)
    rep_path = write_config(tmp_path, find(objects, "ConfigMap", cm_name), key)
    rep_env = pod_env(sidecar, secrets)
    del rep_env[REPLICATION_CONFIG_FILE_ENV]
    rep_cfg = load_replication_config(rep_path, env=rep_env)
    rep_db = refstore_database(rep_cfg)
    assert (rep_db.type, rep_db.dynamodb) == ("dynamodb", server_db.dynamodb)
    assert rep_cfg.mirrors_database.to_dict()["dynamodb"]["table_name"] == (
        "my-replication-table")
    # the other replicas reach this one at its pod's address
    assert rep_cfg.own_address() == "http://10.1.2.3:8008"


def test_dynamodb_without_static_keys_uses_the_pod_identity(chart: helm.Chart,
                                                            tmp_path: Path) -> None:
    """A Secret holding only the encryption key leaves the AWS keys to the default
    chain (IRSA); the chart-created Secret holds the keys when secrets.* give them."""
    values = {"config": {"database": {"type": "dynamodb",
                                      "dynamodb": {"table_name": "lakefs-metadata"}}},
              "secrets": {"authEncryptSecretKey": "s3cr3t"}}
    objects = render(chart, values)
    validate_all(objects)
    full = "lakefs-source-lakefs-mirror"
    assert find(objects, "Secret", full)["stringData"] == {"auth_encrypt_secret_key": "s3cr3t"}
    server = container(find(objects, "Deployment", full))
    env = pod_env(server, {full: {"auth_encrypt_secret_key": "s3cr3t"}})
    del env[SERVER_CONFIG_FILE_ENV]
    path = write_config(tmp_path, find(objects, "ConfigMap", full), "config.yaml")
    db = load_server_config(path, env=env).database
    assert (db.type, db.dynamodb.table_name) == ("dynamodb", "lakefs-metadata")
    assert db.dynamodb.aws_access_key_id is None and db.dynamodb.aws_secret_access_key is None

    values["secrets"] |= {"dynamodbAccessKeyId": "AKIAX", "dynamodbSecretAccessKey": "sk"}
    secret = find(render(chart, values), "Secret", full)
    assert secret["stringData"] == {"auth_encrypt_secret_key": "s3cr3t",
                                    "dynamodb_aws_access_key_id": "AKIAX",
                                    "dynamodb_aws_secret_access_key": "sk"}


@pytest.mark.parametrize("database, problem", [
    ({"type": "dynamo"}, "at '/config/database/type'"),
    ({"type": "dynamodb"}, "missing property 'dynamodb'"),
    ({"type": "dynamodb", "dynamodb": {"aws_region": "us-east-1"}},
     "missing property 'table_name'"),
    ({"type": "dynamodb", "dynamodb": {"table_name": "t!"}},
     "/config/database/dynamodb/table_name"),
    ({"type": "dynamodb", "dynamodb": {"table_name": "tbl", "read_capacity_units": 5}},
     "write_capacity_units"),
    ({"type": "dynamodb", "dynamodb": {"table_name": "tbl", "tablename": "tbl"}}, "'tablename'"),
], ids=["type", "no-block", "no-table", "bad-table", "one-capacity", "unknown-key"])
def test_bad_dynamodb_values_are_refused(chart: helm.Chart, database: dict[str, Any],
                                         problem: str) -> None:
    with pytest.raises(helm.HelmValuesError) as err:
        chart.render({"config": {"database": database}}, name="x", namespace=NAMESPACE)
    assert problem in str(err.value)


# --- bad values fail clearly ----------------------------------------------------------
BAD_VALUES_PROBLEMS = [
    "/replication/config/mirrors_database/type",
    "organization_id",
    "/replication/port",
    "/replication/config/validator/run_interval",
]


def test_bad_values_file_fails_lint(chart: helm.Chart) -> None:
    findings = "\n".join(serious(lint(load_values(BAD_VALUES))))
    for problem in BAD_VALUES_PROBLEMS:
        assert problem in findings


def test_bad_values_file_fails_template(chart: helm.Chart) -> None:
    with pytest.raises(helm.HelmValuesError) as err:
        chart.render(load_values(BAD_VALUES), name="lakefs-source", namespace=NAMESPACE)
    for problem in BAD_VALUES_PROBLEMS:
        assert problem in str(err.value)


def test_replication_without_credentials_fails_template(chart: helm.Chart) -> None:
    values = load_values(REGION_VALUES["us-east-1"])
    del values["replication"]["extraEnvVarsSecret"]
    del values["replication"]["config"]["auth"]
    with pytest.raises(helm.HelmRenderError, match="replication.extraEnvVarsSecret"):
        chart.render(values, name="lakefs-source", namespace=NAMESPACE)


@pytest.mark.parametrize(
    "missing", ["region", "organization_id", "dst_endpoints", "mirrors_database"]
)
def test_replication_required_fields(chart: helm.Chart, missing: str) -> None:
    values = load_values(REGION_VALUES["us-west-2"])
    del values["replication"]["config"][missing]
    with pytest.raises(helm.HelmValuesError, match=missing):
        chart.render(values, name="lakefs-dest", namespace=NAMESPACE)


def test_kubernetes_validate_rejects_a_broken_manifest(chart: helm.Chart) -> None:
    """The manifest check can fail: a wrong type and an unknown field are caught."""
    deployment = find(render(chart, None), "Deployment", "lakefs-source-lakefs-mirror")
    wrong_type = copy.deepcopy(deployment)
    wrong_type["spec"]["replicas"] = "one"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong_type, KUBE_VERSION, strict=True)
    unknown = copy.deepcopy(deployment)
    container(unknown)["livenessProbe"]["httpGet"]["pathh"] = "/_health"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(unknown, KUBE_VERSION, strict=True)


# --- values.yaml is documented --------------------------------------------------------
def test_every_value_is_documented() -> None:
    """Each top-level key, and each key one level down, has a comment right above it."""
    lines = (CHART / "values.yaml").read_text(encoding="utf-8").splitlines()
    undocumented = []
    for i, line in enumerate(lines):
        match = re.match(r"^( {0,2})([A-Za-z][\w]*):", line)
        if not match:
            continue
        above = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        if not above.lstrip().startswith("#"):
            undocumented.append(match.group(2))
    assert undocumented == []
