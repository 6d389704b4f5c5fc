#!/usr/bin/env python3
"""Cross-checks the Kubernetes manifests in deploy/k8s against each other, the
server's flags and the Dockerfile: what a schema check cannot see.

  * every --flag in a habitat-server container's args is an ABSL_FLAG of
    server/main.cc;
  * Service, PodMonitor and headless-Service selectors select pods of some
    Deployment, and their named target ports exist on those pods;
  * gRPC probes target the port of --health_address; the prometheus.io/port
    annotation and the "metrics" port agree with --metrics_address;
  * there is a NetworkPolicy; its selector and named ports exist on server pods, and it
    never admits the plaintext health port (only the node's kubelet may
    reach it) nor has a rule open to every port;
  * the HorizontalPodAutoscaler targets an existing Deployment that sets CPU
    requests and leaves `replicas` to it;
  * volume mounts name declared volumes, claims name a PVC in deploy/k8s;
  * server pods run as the Dockerfile's numeric USER, non-root, with a
    read-only root file system;
  * the agent sidecar's flags are ABSL_FLAGs of agent/sidecar/main.cc, its
    --server names a Service port that exists, and it runs as the numeric
    USER of Dockerfile.agent;
  * prometheus.yml's DNS name is the headless metrics Service;
  * StatefulSets name a headless Service; $(VAR) references in args name an
    env var of the container (the kubelet leaves unknown ones as text);
    secretKeyRefs to a Secret in deploy/k8s name one of its keys.

Manifests are deploy/k8s/*.yaml and the optional sets in its subdirectories
(deploy/k8s/postgres/).

usage: check_manifests.py REPO_ROOT
"""
import glob
import os
import re
import sys

import yaml  # PyYAML, in the test's virtual environment


def load(root):
    docs = []
    paths = glob.glob(os.path.join(root, "deploy/k8s/*.yaml")) + \
        glob.glob(os.path.join(root, "deploy/k8s/*/*.yaml"))
    for path in sorted(paths):
        with open(path, encoding="utf-8") as f:
            for doc in yaml.safe_load_all(f):
                if doc:
                    docs.append((os.path.relpath(path, root), doc))
    return docs


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def flag_value(args, name):
    for arg in args:
        if arg.startswith(f"--{name}="):
            return arg.split("=", 1)[1]
    return None


def port_of(address):
    return int(address.rsplit(":", 1)[1]) if address and ":" in address else None


def flags_of(path):
    with open(path, encoding="utf-8") as f:
        flags = set(re.findall(r"ABSL_FLAG\(\s*[\w:<>]+\s*,\s*(\w+)\s*,", f.read()))
    if not flags:
        raise SystemExit(f"no ABSL_FLAG found in {path}")
    return flags


def image_uid(path):
    with open(path, encoding="utf-8") as f:
        user = re.search(r"^USER\s+(\d+)(?::(\d+))?\s*$", f.read(), re.M)
    if not user:
        raise SystemExit(f"{path}: no numeric USER")
    return int(user.group(1))


def main(argv):
    if len(argv) != 2:
        raise SystemExit(__doc__)
    root = argv[1]
    server_flags = flags_of(os.path.join(root, "server/main.cc"))
    server_uid = image_uid(os.path.join(root, "deploy/docker/Dockerfile.server"))
    agent_flags = flags_of(os.path.join(root, "agent/sidecar/main.cc"))
    agent_uid = image_uid(os.path.join(root, "deploy/docker/Dockerfile.agent"))

    docs = load(root)
    errors = []
    by_kind = {}
    for path, doc in docs:
        by_kind.setdefault(doc["kind"], []).append((path, doc))

    pods = []  # (where, labels, pod spec, annotations)
    for path, doc in by_kind.get("Deployment", []):
        where = f"{path}: Deployment {doc['metadata']['name']}"
        template = doc["spec"]["template"]
        labels = template["metadata"].get("labels", {})
        if not selects(doc["spec"]["selector"].get("matchLabels", {}), labels):
            errors.append(f"{where}: selector does not match the pod template's labels")
        pods.append((where, labels, template["spec"], template["metadata"].get("annotations", {})))
    for path, doc in by_kind.get("StatefulSet", []):
        where = f"{path}: StatefulSet {doc['metadata']['name']}"
        template = doc["spec"]["template"]
        labels = template["metadata"].get("labels", {})
        if not selects(doc["spec"]["selector"].get("matchLabels", {}), labels):
            errors.append(f"{where}: selector does not match the pod template's labels")
        spec = dict(template["spec"])
        # Claim templates are volumes of the pods too.
        spec["volumes"] = spec.get("volumes", []) + [
            {"name": t["metadata"]["name"], "claimTemplate": True}
            for t in doc["spec"].get("volumeClaimTemplates", [])]
        pods.append((where, labels, spec, template["metadata"].get("annotations", {})))
    for path, doc in by_kind.get("Pod", []):
        pods.append((f"{path}: Pod {doc['metadata']['name']}", doc["metadata"].get("labels", {}),
                     doc["spec"], doc["metadata"].get("annotations", {})))

    pvcs = {d["metadata"]["name"] for _, d in by_kind.get("PersistentVolumeClaim", [])}
    services = {d["metadata"]["name"]: d for _, d in by_kind.get("Service", [])}
    secrets = {d["metadata"]["name"]: {**d.get("data", {}), **d.get("stringData", {})}
               for _, d in by_kind.get("Secret", [])}
    for path, doc in by_kind.get("StatefulSet", []):
        svc = services.get(doc["spec"].get("serviceName"))
        if not svc or svc["spec"].get("clusterIP") != "None":
            errors.append(f"{path}: StatefulSet {doc['metadata']['name']}: serviceName is not a "
                          "headless Service in deploy/k8s")

    def containers(spec):
        return spec.get("initContainers", []) + spec.get("containers", [])

    def port_names(spec):
        return {p["name"]: p["containerPort"]
                for c in containers(spec) for p in c.get("ports", []) if "name" in p}

    for where, labels, spec, annotations in pods:
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for volume in volumes.values():
            claim = volume.get("persistentVolumeClaim", {}).get("claimName")
            if claim and claim not in pvcs:
                errors.append(f"{where}: claim '{claim}' is not defined in deploy/k8s")
        for c in containers(spec):
            env = {e["name"]: e for e in c.get("env", [])}
            for arg in c.get("command", []) + c.get("args", []):
                for ref in re.findall(r"(?<!\$)\$\((\w+)\)", arg):
                    if ref not in env:
                        errors.append(f"{where}: container {c['name']} uses $({ref}) but sets no such env var")
            for var in env.values():
                ref = var.get("valueFrom", {}).get("secretKeyRef")
                secret = secrets.get(ref["name"]) if ref else None
                if secret is not None and ref["key"] not in secret:
                    errors.append(f"{where}: env {var['name']}: Secret {ref['name']} has no key {ref['key']}")
            for mount in c.get("volumeMounts", []):
                if mount["name"] not in volumes:
                    errors.append(f"{where}: container {c['name']} mounts undeclared volume {mount['name']}")
            image = c.get("image", "")
            ctx = {**spec.get("securityContext", {}), **c.get("securityContext", {})}
            if image.startswith("habitat-agent:"):
                argv_ = c.get("command", [])[1:] + c.get("args", [])
                for arg in argv_:
                    name = re.match(r"--(\w+)", arg)
                    if not name or name.group(1) not in agent_flags:
                        errors.append(f"{where}: '{arg}' is not a habitat-agent flag (agent/sidecar/main.cc)")
                server = flag_value(argv_, "server")
                host, port = (server or ":").rsplit(":", 1)
                svc = services.get(host)
                if not svc or int(port or 0) not in [p["port"] for p in svc["spec"]["ports"]]:
                    errors.append(f"{where}: agent --server={server} is not a Service port in deploy/k8s")
                if ctx.get("runAsUser") != agent_uid or not ctx.get("runAsNonRoot"):
                    errors.append(f"{where}: the agent must run as non-root uid {agent_uid} (Dockerfile.agent USER)")
            if not image.startswith("habitat-server:"):
                continue
            args = c.get("args", [])
            for arg in args:
                name = re.match(r"--(\w+)", arg)
                if not name or name.group(1) not in server_flags:
                    errors.append(f"{where}: '{arg}' is not a habitat-server flag (server/main.cc)")
            if ctx.get("runAsUser") != server_uid or not ctx.get("runAsNonRoot"):
                errors.append(f"{where}: must run as non-root uid {server_uid} (Dockerfile.server USER)")
            if not ctx.get("readOnlyRootFilesystem") or ctx.get("allowPrivilegeEscalation", True):
                errors.append(f"{where}: needs readOnlyRootFilesystem and no privilege escalation")
            if "cpu" not in c.get("resources", {}).get("requests", {}):
                errors.append(f"{where}: container {c['name']} has no CPU request")
            ports = {p["containerPort"] for p in c.get("ports", [])}
            health = port_of(flag_value(args, "health_address"))
            for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
                probe = c.get(kind)
                if not probe:
                    errors.append(f"{where}: no {kind}")
                elif "grpc" not in probe or probe["grpc"]["port"] != health or health not in ports:
                    errors.append(f"{where}: {kind} must be a gRPC probe on the --health_address port")
            metrics = port_of(flag_value(args, "metrics_address"))
            if port_names(spec).get("metrics") != metrics or \
                    str(metrics) != annotations.get("prometheus.io/port"):
                errors.append(f"{where}: 'metrics' port, prometheus.io/port and --metrics_address disagree")

    def check_selector(where, selector, port_name):
        chosen = [p for p in pods if selects(selector, p[1])]
        if not chosen:
            errors.append(f"{where}: selector {selector} matches no pod in deploy/k8s")
        for pod in chosen:
            if isinstance(port_name, str) and port_name not in port_names(pod[2]):
                errors.append(f"{where}: {pod[0]} has no port named '{port_name}'")
        return chosen

    for path, svc in by_kind.get("Service", []):
        for port in svc["spec"]["ports"]:
            check_selector(f"{path}: Service {svc['metadata']['name']}", svc["spec"]["selector"],
                           port.get("targetPort"))
    for path, mon in by_kind.get("PodMonitor", []):
        where = f"{path}: PodMonitor {mon['metadata']['name']}"
        for endpoint in mon["spec"]["podMetricsEndpoints"]:
            chosen = check_selector(where, mon["spec"]["selector"]["matchLabels"], endpoint["port"])
            for pod in chosen:
                if mon["spec"].get("jobLabel") not in pod[1]:
                    errors.append(f"{where}: jobLabel is not a label of {pod[0]}")
    if not by_kind.get("NetworkPolicy"):
        errors.append("deploy/k8s: no NetworkPolicy keeps the network off the health and metrics ports")
    for path, policy in by_kind.get("NetworkPolicy", []):
        where = f"{path}: NetworkPolicy {policy['metadata']['name']}"
        ingress = policy["spec"].get("ingress", [])
        admitted = [p["port"] for rule in ingress for p in rule.get("ports", [])]
        if any(not rule.get("ports") for rule in ingress):
            errors.append(f"{where}: a rule without ports admits every port, the health port too")
        for port_name in admitted:
            check_selector(where, policy["spec"]["podSelector"]["matchLabels"], port_name)
        if "health" in admitted:
            errors.append(f"{where}: admits the plaintext health port; only the node's kubelet may reach it")
    for path, hpa in by_kind.get("HorizontalPodAutoscaler", []):
        target = hpa["spec"]["scaleTargetRef"]
        deps = [d for _, d in by_kind.get("Deployment", []) if d["metadata"]["name"] == target["name"]]
        if target["kind"] != "Deployment" or not deps:
            errors.append(f"{path}: HPA target {target} is not a Deployment in deploy/k8s")
        elif "replicas" in deps[0]["spec"]:
            errors.append(f"{path}: Deployment {target['name']} sets replicas; the HPA owns them")
        if hpa["spec"]["minReplicas"] > hpa["spec"]["maxReplicas"]:
            errors.append(f"{path}: minReplicas > maxReplicas")

    with open(os.path.join(root, "deploy/prometheus/prometheus.yml"), encoding="utf-8") as f:
        prom = yaml.safe_load(f)
    for job in prom["scrape_configs"]:
        for sd in job.get("dns_sd_configs", []):
            for name in sd["names"]:
                svc = services.get(name.split(".")[0])
                if not svc or svc["spec"].get("clusterIP") != "None":
                    errors.append(f"prometheus.yml: {name} is not a headless Service in deploy/k8s")

    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 1
    print(f"{len(docs)} manifests cross-checked ({len(pods)} pod specs, {len(services)} services)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
