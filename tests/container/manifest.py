#!/usr/bin/python3
"""What the container tests read from a manifest of deploy/k8s (a Pod, or a
workload's pod template), one query per call, on stdout:

  caps MANIFEST CONTAINER     the capabilities the container adds, on one line
  probes MANIFEST CONTAINER   its httpGet probes, a line each: KIND HOST PORT PATH
                              (HOST "-" when the probe names none: the pod's
                              address; a named port resolved to its number)
  empty-dirs MANIFEST         the names of the pod's emptyDir volumes
"""
import sys

import yaml


def pod_specs(path):
    with open(path) as f:
        for d in yaml.safe_load_all(f):
            spec = d and (d.get("spec", {}).get("template", {}).get("spec") or d.get("spec", {}))
            if spec and "containers" in spec:
                yield spec


def container(path, name):
    for spec in pod_specs(path):
        for c in spec.get("containers", []) + spec.get("initContainers", []):
            if c["name"] == name:
                return c
    sys.exit(f"manifest: no container {name} in {path}")


def main():
    query, path = sys.argv[1], sys.argv[2]
    if query == "caps":
        c = container(path, sys.argv[3])
        print(" ".join(c.get("securityContext", {}).get("capabilities", {}).get("add", [])))
    elif query == "probes":
        c = container(path, sys.argv[3])
        ports = {p["name"]: p["containerPort"] for p in c.get("ports", []) if "name" in p}
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            get = c.get(kind, {}).get("httpGet")
            if get:
                print(kind, get.get("host", "-"), ports.get(get["port"], get["port"]), get["path"])
    elif query == "empty-dirs":
        for spec in pod_specs(path):
            for v in spec.get("volumes", []):
                if "emptyDir" in v:
                    print(v["name"])
    else:
        sys.exit(f"manifest: unknown query {query}")


if __name__ == "__main__":
    main()
