#!/usr/bin/python3
"""Renders a shipped manifest of deploy/k8s for `podman kube play` (4.3), changing
only what podman cannot run as written or what the test must observe; every
change is one of the options below, and deploy/k8s/README.md lists the
podman differences. Always:

  seccomp                each container's securityContext.seccompProfile (its
                         own, else the pod's) is also written as the annotation
                         container.seccomp.security.alpha.kubernetes.io/NAME,
                         the form podman 4.3 reads (and the kubelet used before
                         1.19): localhost/FILE, runtime/default, unconfined.
  ports                  containers' `ports` are dropped: podman would publish
                         them on the host, and the test's pods have no network
                         of podman's (the test reaches the ports in the pod's
                         namespace, as the kubelet's probes reach the pod's
                         address).

Options:

  --daemonset            the DaemonSet's pod template becomes a Pod of the
                         DaemonSet's name (podman plays Pods and Deployments, not
                         DaemonSets); its ServiceAccount is dropped, its
                         ConfigMaps kept. `hostNetwork` is dropped: the test
                         wires the pod's own namespace as the node's.
  --native-sidecars      init containers with `restartPolicy: Always` (native
                         sidecars, Kubernetes >= 1.29; podman 4.3 would wait for
                         them to exit) become the first regular containers.
  --name NAME            the Pod's name.
  --restart POLICY       the Pod's restartPolicy (the test's app exits when it
                         has its datagrams; Always would run it again).
  --hostpath OLD=NEW     a hostPath volume's path (the node's /run/npf becomes a
                         directory of the test's own).
  --args CONTAINER=JSON  a container's args (the example app's `-o /dev/null`
                         becomes a file the test reads, with a datagram count).
  --mount CONTAINER:PATH=HOSTDIR
                         an extra hostPath volume for a container (where the
                         app writes what it received).
Reads the manifest's path, writes YAML on stdout.
"""
import argparse
import json
import sys

import yaml


def pod_of_daemonset(docs):
    out = []
    for d in docs:
        kind = d.get("kind")
        if kind == "ServiceAccount":
            continue
        if kind == "DaemonSet":
            tmpl = d["spec"]["template"]
            spec = dict(tmpl["spec"])
            spec.pop("hostNetwork", None)
            spec.pop("dnsPolicy", None)  # ClusterFirstWithHostNet: no cluster DNS here
            d = {"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": d["metadata"]["name"], **{k: v for k, v in tmpl.get("metadata", {}).items()}},
                 "spec": spec}
        out.append(d)
    return out


def pods(docs):
    return [d for d in docs if d.get("kind") == "Pod"]


def containers(pod):
    return pod["spec"].get("containers", []) + pod["spec"].get("initContainers", [])


def container(pod, name):
    for c in containers(pod):
        if c["name"] == name:
            return c
    sys.exit(f"render: no container {name} in pod {pod['metadata']['name']}")


def seccomp_annotations(pod):
    forms = {"Localhost": lambda p: "localhost/" + p["localhostProfile"],
             "RuntimeDefault": lambda p: "runtime/default", "Unconfined": lambda p: "unconfined"}
    pod_profile = pod["spec"].get("securityContext", {}).get("seccompProfile")
    notes = pod["metadata"].setdefault("annotations", {})
    for c in containers(pod):
        profile = c.get("securityContext", {}).get("seccompProfile", pod_profile)
        if profile:
            notes["container.seccomp.security.alpha.kubernetes.io/" + c["name"]] = forms[profile["type"]](profile)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("manifest")
    ap.add_argument("--daemonset", action="store_true")
    ap.add_argument("--native-sidecars", action="store_true")
    ap.add_argument("--name")
    ap.add_argument("--restart")
    ap.add_argument("--hostpath", action="append", default=[])
    ap.add_argument("--args", action="append", default=[])
    ap.add_argument("--mount", action="append", default=[])
    o = ap.parse_args()

    with open(o.manifest) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    if o.daemonset:
        docs = pod_of_daemonset(docs)
    ps = pods(docs)
    if len(ps) != 1:
        sys.exit(f"render: {o.manifest} has {len(ps)} pods, expected one")
    pod = ps[0]
    spec = pod["spec"]
    if o.native_sidecars:
        inits = spec.get("initContainers", [])
        sidecars = [c for c in inits if c.get("restartPolicy") == "Always"]
        if not sidecars:
            sys.exit(f"render: {o.manifest} has no native sidecar")
        for c in sidecars:
            del c["restartPolicy"]
        spec["initContainers"] = [c for c in inits if c not in sidecars]
        if not spec["initContainers"]:
            del spec["initContainers"]
        spec["containers"] = sidecars + spec["containers"]
    if o.name:
        pod["metadata"]["name"] = o.name
    if o.restart:
        spec["restartPolicy"] = o.restart
    for hp in o.hostpath:
        old, new = hp.split("=", 1)
        hits = [v for v in spec.get("volumes", []) if v.get("hostPath", {}).get("path") == old]
        if not hits:
            sys.exit(f"render: no hostPath volume {old}")
        for v in hits:
            v["hostPath"]["path"] = new
    for a in o.args:
        name, args = a.split("=", 1)
        container(pod, name)["args"] = json.loads(args)
    for i, m in enumerate(o.mount):
        name, rest = m.split(":", 1)
        path, host = rest.split("=", 1)
        vol = f"test-mount-{i}"
        spec.setdefault("volumes", []).append({"name": vol, "hostPath": {"path": host, "type": "Directory"}})
        container(pod, name).setdefault("volumeMounts", []).append({"name": vol, "mountPath": path})
    for c in containers(pod):
        c.pop("ports", None)
    seccomp_annotations(pod)
    yaml.safe_dump_all(docs, sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main()
