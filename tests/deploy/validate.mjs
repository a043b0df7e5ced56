// Validates Kubernetes manifests offline: every YAML document against the schema of
// its apiVersion/kind (kubernetes-models' compiled OpenAPI validators, plus unknown
// fields as errors), then npf's own rules for npfd and its clients.
// usage: node validate.mjs --modules DIR FILE.yaml...   (DIR: where npm ci installed package.json's deps)
// exit: 0 valid, 1 a manifest is invalid (one line per problem), 2 usage or setup.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";

// npfd's capabilities, exactly; deploy/k8s/README.md explains each.
export const NPFD_CAPS = ["BPF", "IPC_LOCK", "NET_ADMIN", "NET_RAW", "PERFMON"];
const SOCKET_DIR = "/run/npf";
const CONFIG_KEYS = ["ifaces", "delegate", "socket", "socket_group", "spill_dir", "allow_root", "max_connections",
    "hello_timeout_ms", "client_install_wait_us", "pods_socket", "clients"];
const RULE_KEYS = ["uid", "gid", "cgroup", "pod", "ports", "addr", "region_bytes", "resident_bytes", "flows", "connections"];
// npf-cni's containers in the DaemonSet, by subcommand: the capabilities each adds, exactly.
const CNI_CAPS = { install: [], watch: ["SYS_ADMIN"] };
const POD_SOCKET = "@npf";

const args = process.argv.slice(2);
const mi = args.indexOf("--modules");
if (mi < 0 || mi + 1 >= args.length || args.length < 3) {
    console.error("usage: node validate.mjs --modules DIR FILE.yaml...");
    process.exit(2);
}
const modules = args[mi + 1];
const files = args.filter((_, i) => i !== mi && i !== mi + 1);
const require = createRequire(join(modules, "package.json"));
const YAML = require("yaml");
const modelsDir = dirname(require.resolve("kubernetes-models/package.json"));

const problems = [];
const fail = (where, msg) => problems.push(`${where}: ${msg}`);

// The schema validator of apiVersion/kind: the model module names its _schemas file.
async function schemaFor(apiVersion, kind) {
    if (!/^[a-z0-9.]*\/?v[0-9a-z]+$/.test(apiVersion) || !/^[A-Za-z]+$/.test(kind))
        return null;
    let src;
    try {
        src = readFileSync(join(modelsDir, apiVersion, `${kind}.mjs`), "utf8");
    } catch {
        return null;
    }
    const m = /_schemas\/(\w+)\.mjs/.exec(src);
    return m ? (await import(pathToFileURL(join(modelsDir, "_schemas", `${m[1]}.mjs`)).href)).validate : null;
}

// Wraps a document so that every key the validator reads is recorded: a key of an
// object it never looked at is a field the schema does not have (maps such as labels
// are enumerated whole, so their keys all count as read).
function tracked(root) {
    const read = new Map(), proxies = new WeakMap(), paths = new Map();
    const wrap = (v, path) => {
        if (v === null || typeof v !== "object") return v;
        if (proxies.has(v)) return proxies.get(v);
        const keys = new Set();
        read.set(v, keys);
        paths.set(v, path);
        const p = new Proxy(v, {
            get(t, k, r) {
                if (typeof k === "string") keys.add(k);
                return wrap(Reflect.get(t, k, r), `${path}/${String(k)}`);
            },
            has(t, k) {
                if (typeof k === "string") keys.add(k);
                return Reflect.has(t, k);
            },
            ownKeys(t) {
                for (const k of Reflect.ownKeys(t)) if (typeof k === "string") keys.add(k);
                return Reflect.ownKeys(t);
            },
        });
        proxies.set(v, p);
        return p;
    };
    const proxy = wrap(root, "");
    const unknown = () => {
        const out = [];
        for (const [obj, keys] of read)
            if (!Array.isArray(obj))
                for (const k of Object.keys(obj)) if (!keys.has(k)) out.push(`${paths.get(obj)}/${k}`);
        return out;
    };
    return { proxy, unknown };
}

function podSpecOf(doc) {
    if (doc.kind === "Pod") return doc.spec;
    if (["DaemonSet", "Deployment", "StatefulSet", "Job"].includes(doc.kind)) return doc.spec?.template?.spec;
    return null;
}

const sorted = (a) => [...(a ?? [])].sort();
const same = (a, b) => JSON.stringify(sorted(a)) === JSON.stringify(sorted(b));

function checkNpfdConfig(where, text) {
    let c;
    try {
        c = JSON.parse(text);
    } catch (e) {
        return fail(where, `npfd.json is not JSON: ${e.message}`);
    }
    for (const k of Object.keys(c)) if (!CONFIG_KEYS.includes(k)) fail(where, `npfd.json: ${k}: unknown key`);
    if (!Array.isArray(c.ifaces) || !c.ifaces.length) fail(where, "npfd.json: ifaces: required, non-empty");
    (c.delegate ?? []).forEach((d, i) => {
        if (!(c.ifaces ?? []).includes(d)) fail(where, `npfd.json: delegate[${i}]: "${d}" is not one of ifaces`);
    });
    (c.clients ?? []).forEach((r, i) => {
        for (const k of Object.keys(r)) if (!RULE_KEYS.includes(k)) fail(where, `npfd.json: clients[${i}].${k}: unknown key`);
        if (!Array.isArray(r.ports) || !r.ports.length) fail(where, `npfd.json: clients[${i}].ports: required`);
    });
}

function checkPod(where, doc, spec) {
    const sc = spec.securityContext ?? {};
    const all = [...(spec.initContainers ?? []), ...(spec.containers ?? [])];
    const npfd = all.filter((c) => c.name === "npfd");
    const cni = all.filter((c) => c.name !== "npfd" && (c.command ?? [])[0] === "npf-cni");
    const apps = all.filter((c) => c.name !== "npfd" && !cni.includes(c));
    const volumes = new Map((spec.volumes ?? []).map((v) => [v.name, v]));
    const socketVolume = (c) => (c.volumeMounts ?? []).find((m) => m.mountPath === SOCKET_DIR)?.name;

    for (const c of npfd) {
        const w = `${where}: container npfd`;
        const csc = c.securityContext ?? {};
        if (csc.privileged) fail(w, "must not be privileged");
        if (!same(csc.capabilities?.drop, ["ALL"])) fail(w, "capabilities.drop must be [ALL]");
        if (!same(csc.capabilities?.add, NPFD_CAPS))
            fail(w, `capabilities.add must be exactly ${NPFD_CAPS.join(", ")}, got ${sorted(csc.capabilities?.add).join(", ") || "none"}`);
        if (!socketVolume(c)) fail(w, `no volume mounted at ${SOCKET_DIR}`);
        const bpffs = (c.volumeMounts ?? []).find((m) => m.mountPath === "/sys/fs/bpf");
        if (volumes.get(bpffs?.name)?.hostPath?.path !== "/sys/fs/bpf")
            fail(w, "/sys/fs/bpf must be the host's bpffs (hostPath), else npfd has to mount one (CAP_SYS_ADMIN)");
    }
    // npf-cni beside npfd (the DaemonSet): root, with exactly what its subcommand needs.
    for (const c of cni) {
        const w = `${where}: container ${c.name}`;
        const csc = c.securityContext ?? {};
        const want = CNI_CAPS[(c.command ?? [])[1]];
        if (!want) {
            fail(w, `npf-cni ${(c.command ?? [])[1]}: not a subcommand a container runs (install, watch)`);
            continue;
        }
        if (csc.privileged) fail(w, "must not be privileged");
        if (csc.allowPrivilegeEscalation !== false) fail(w, "allowPrivilegeEscalation must be false");
        if (csc.readOnlyRootFilesystem !== true) fail(w, "readOnlyRootFilesystem must be true");
        if (!same(csc.capabilities?.drop, ["ALL"])) fail(w, "capabilities.drop must be [ALL]");
        if (!same(csc.capabilities?.add ?? [], want))
            fail(w, `capabilities.add must be exactly [${want.join(", ")}], got [${sorted(csc.capabilities?.add).join(", ")}]`);
        if (!npfd.length) fail(w, "npf-cni runs beside npfd");
        else if (c.command[1] === "watch" && socketVolume(c) !== socketVolume(npfd[0]))
            fail(w, `its ${SOCKET_DIR} must be npfd's (the pods socket)`);
    }
    for (const c of apps) {
        const w = `${where}: container ${c.name}`;
        const csc = c.securityContext ?? {};
        const runAsUser = csc.runAsUser ?? sc.runAsUser;
        if (!(csc.runAsNonRoot ?? sc.runAsNonRoot)) fail(w, "runAsNonRoot must be true");
        if (runAsUser === undefined || runAsUser === 0) fail(w, "runAsUser must be a non-zero uid");
        if (csc.privileged) fail(w, "must not be privileged");
        if (csc.allowPrivilegeEscalation !== false) fail(w, "allowPrivilegeEscalation must be false");
        if (csc.readOnlyRootFilesystem !== true) fail(w, "readOnlyRootFilesystem must be true");
        if ((csc.capabilities?.add ?? []).length) fail(w, `must add no capabilities, adds ${csc.capabilities.add.join(", ")}`);
        if (!same(csc.capabilities?.drop, ["ALL"])) fail(w, "capabilities.drop must be [ALL]");
        const vol = socketVolume(c);
        if (npfd.length) { // the sidecar: npfd's socket in a directory the pod shares
            if (!vol) {
                fail(w, `no volume mounted at ${SOCKET_DIR} (npfd's socket directory)`);
                continue;
            }
            if (!npfd.every((n) => socketVolume(n) === vol))
                fail(w, `its ${SOCKET_DIR} (volume ${vol}) is not npfd's (volume ${socketVolume(npfd[0])})`);
            if (!volumes.get(vol)?.emptyDir) fail(w, `${SOCKET_DIR} shared with npfd must be an emptyDir`);
        } else { // the node's npfd: through the pod's own listener, no volume
            if (vol) fail(w, `mounts ${SOCKET_DIR} (volume ${vol}): a pod of the node's npfd connects to ${POD_SOCKET}, with no volume`);
            const a = c.args ?? [];
            const i = a.indexOf("--connect");
            if (i < 0 || a[i + 1] !== POD_SOCKET) fail(w, `must connect to ${POD_SOCKET} (--connect ${POD_SOCKET})`);
            if ((spec.volumes ?? []).some((v) => v.hostPath)) fail(w, "a client pod has no hostPath volume");
        }
    }
    if (doc.kind === "DaemonSet") {
        const ann = doc.spec.template.metadata?.annotations ?? {};
        const want = { "prometheus.io/scrape": "true", "prometheus.io/port": "9464", "prometheus.io/path": "/metrics" };
        for (const [k, v] of Object.entries(want))
            if (ann[k] !== v) fail(where, `pod template annotation ${k} must be "${v}", got ${JSON.stringify(ann[k])}`);
        if (spec.hostNetwork !== true) fail(where, "hostNetwork must be true");
        if (spec.priorityClassName !== "system-node-critical") fail(where, "priorityClassName must be system-node-critical");
        if (!spec.serviceAccountName) fail(where, "serviceAccountName must be set");
        if (!(spec.tolerations ?? []).some((t) => t.operator === "Exists" && !t.key))
            fail(where, "must tolerate every taint (operator: Exists)");
        if (!npfd.length) fail(where, "no container named npfd");
        for (const c of npfd) {
            const a = c.args ?? [];
            const i = a.indexOf("--metrics");
            if (i < 0 || a[i + 1] !== "0.0.0.0:9464") fail(where, "npfd must run with --metrics 0.0.0.0:9464");
            if (!(c.ports ?? []).some((p) => p.containerPort === 9464)) fail(where, "npfd must declare containerPort 9464");
        }
    }
}

for (const file of files) {
    let docs;
    try {
        docs = YAML.parseAllDocuments(readFileSync(file, "utf8"), { uniqueKeys: true });
    } catch (e) {
        fail(file, e.message);
        continue;
    }
    let n = 0;
    for (const d of docs) {
        n++;
        if (d.errors.length) {
            for (const e of d.errors) fail(`${file}#${n}`, `YAML: ${e.message}`);
            continue;
        }
        const doc = d.toJS();
        if (doc === null) continue;
        const where = `${file}#${n} ${doc?.kind ?? "?"}/${doc?.metadata?.name ?? "?"}`;
        const validate = await schemaFor(String(doc?.apiVersion ?? ""), String(doc?.kind ?? ""));
        if (!validate) {
            fail(where, `unknown apiVersion/kind ${doc?.apiVersion}/${doc?.kind}`);
            continue;
        }
        const t = tracked(doc);
        if (!validate(t.proxy))
            for (const e of validate.errors) fail(where, `${e.instancePath || "/"}: ${e.keyword} ${JSON.stringify(e.params)}`);
        for (const u of t.unknown()) fail(where, `${u}: unknown field`);
        if (doc.kind === "ConfigMap" && doc.data?.["npfd.json"] !== undefined) checkNpfdConfig(where, doc.data["npfd.json"]);
        const spec = podSpecOf(doc);
        if (spec) checkPod(where, doc, spec);
    }
    if (!n) fail(file, "no YAML documents");
}
for (const p of problems) console.log(p);
console.log(`${files.length} file(s): ${problems.length ? problems.length + " problem(s)" : "valid"}`);
process.exit(problems.length ? 1 : 0);
