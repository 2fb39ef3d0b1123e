#!/usr/bin/env python3
"""A small Kubernetes API server double for nvdra's tests and local demo.

It speaks the real REST protocol on loopback (HTTP or HTTPS) for the few
resources a node plugin touches: ResourceClaims (GET), ResourceSlices (LIST
with field selectors, GET, POST with generateName, PUT with resourceVersion
conflicts, DELETE with preconditions), Nodes (GET, LIST, PUT and PATCH with
resourceVersion conflicts), Events (POST), the resource.nvidia.com
ComputeDomain and ComputeDomainClique objects (GET/LIST), apps/v1
Deployments (GET, LIST with label selectors, POST, DELETE with
propagationPolicy) and Pods (GET, LIST with label selectors, DELETE), and
the discovery documents for resource.k8s.io. Nodes, ResourceSlices, ComputeDomains and ComputeDomainCliques
can be watched (?watch=1&resourceVersion=N&allowWatchBookmarks=true): a
chunked stream of JSON lines, BOOKMARK events, and an ERROR event with a 410
Status for a resourceVersion older than the retained history, as the real
server's watch cache answers. Errors are metav1.Status bodies shaped as the
real server shapes them; a path under a group version the server does not
serve answers with the plain-text "404 page not found" the real server gives.

Paths under /_nvdra/ are a control plane for tests only (load objects, replace
a claim with a new UID, inject faults, switch served versions, read the
request log, play the deployment controller). They are not part of the
Kubernetes API.

Each API request is counted under its client, the bearer token it carries
("" without one; without --token the server accepts any token, so clients
can name themselves by theirs), by verb and resource, and per second. GET
/_nvdra/stats answers those counters, the watch streams open now per
client and resource, and the server's thread count; POST {"clear": true}
resets the counters (open watches stay).

The deployment controller is off by default: a created Deployment then gets
no pods and no status. POST /_nvdra/deployments {"controller": "ready"}
plays the controller and the kubelet: every Deployment (those that exist and
those created later) gets one Pod labelled with its selector, owned by it,
with one ready container, and status.readyReplicas 1. "pending" gives the
pod with a container that is not ready (readyReplicas 0); "off" stops
acting. Deleting a Deployment deletes its pods, as the garbage collector
does for a foreground deletion.

Standard library plus python3-yaml only, so CI needs nothing else.
"""

import argparse
import base64
import bisect
import copy
import datetime
import http.server
import json
import os
import random
import ssl
import string
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid

try:
    import yaml
except ImportError:  # YAML loading is optional; JSON always works.
    yaml = None

RESOURCE_GROUP = "resource.k8s.io"
RESOURCE_VERSIONS = ["v1", "v1beta2", "v1beta1"]
NVIDIA_GROUP = "resource.nvidia.com"
APPS_GROUP = "apps"

# resource plural -> (group, kind, namespaced, verbs)
RESOURCES = {
    "resourceclaims": (RESOURCE_GROUP, "ResourceClaim", True, ["get", "list"]),
    "resourceslices": (RESOURCE_GROUP, "ResourceSlice", False,
                       ["get", "list", "watch", "create", "update", "delete"]),
    "nodes": ("", "Node", False, ["get", "list", "watch", "update", "patch"]),
    "events": ("", "Event", True, ["get", "list", "create"]),
    "computedomains": (NVIDIA_GROUP, "ComputeDomain", True, ["get", "list", "watch"]),
    "computedomaincliques": (NVIDIA_GROUP, "ComputeDomainClique", True, ["get", "list", "watch"]),
    "deployments": (APPS_GROUP, "Deployment", True, ["get", "list", "create", "update", "delete"]),
    "pods": ("", "Pod", True, ["get", "list", "delete"]),
}
KIND_TO_RESOURCE = {v[1]: k for k, v in RESOURCES.items()}

# Fields of a v1 device that v1beta1 nests under "basic".
V1BETA1_BASIC_FIELDS = [
    "attributes", "capacity", "consumesCounters", "nodeName", "nodeSelector", "allNodes",
    "taints", "bindsToNode", "bindingConditions", "bindingFailureConditions",
    "allowMultipleAllocations", "nodeAllocatableResources",
]

GENERATE_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_body(code, reason, message, details=None):
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details is not None:
        body["details"] = details
    return body


def group_resource(resource):
    group = RESOURCES[resource][0]
    return resource + ("." + group if group else "")


def device_to_v1beta1(dev):
    out = {"name": dev.get("name")}
    basic = {}
    for k, v in dev.items():
        if k == "name":
            continue
        if k in V1BETA1_BASIC_FIELDS:
            basic[k] = v
        else:
            out[k] = v
    out["basic"] = basic
    return out


def device_from_v1beta1(dev):
    out = {k: v for k, v in dev.items() if k != "basic"}
    out.update(dev.get("basic") or {})
    return out


class Faults:
    """Injected faults; each applies to the next `count` matching API requests."""

    def __init__(self):
        self.rules = []

    def add(self, rule):
        rule.setdefault("count", 1)
        rule.setdefault("path_prefix", "/")
        rule.setdefault("method", "")
        self.rules.append(rule)

    def take(self, method, path, verb=""):
        for rule in self.rules:
            if rule["count"] == 0:
                continue
            if not path.startswith(rule["path_prefix"]):
                continue
            if rule["method"] and rule["method"] != method:
                continue
            if rule.get("verb") and rule["verb"] != verb:
                continue
            if rule["count"] > 0:
                rule["count"] -= 1
            return rule
        return None


class Stats:
    """API requests counted by client, verb and resource, and per second."""

    def __init__(self):
        self.clear()

    def clear(self):
        self.since = time.time()
        self.total = 0
        self.watches_started = 0
        self.by_client = {}  # client -> verb -> resource -> count
        self.per_second = {}  # int(unix seconds) -> count

    def count(self, client, verb, resource):
        self.total += 1
        if verb == "watch":
            self.watches_started += 1
        per = self.by_client.setdefault(client, {}).setdefault(verb, {})
        per[resource] = per.get(resource, 0) + 1
        sec = int(time.time())
        self.per_second[sec] = self.per_second.get(sec, 0) + 1

    def snapshot(self, watchers):
        open_watches = {}
        for w in watchers:
            per = open_watches.setdefault(w.get("client", ""), {})
            per[w["resource"]] = per.get(w["resource"], 0) + 1
        return {"since": self.since, "now": time.time(), "total": self.total,
                "watches_started": self.watches_started, "requests": copy.deepcopy(self.by_client),
                "per_second": {str(k): v for k, v in sorted(self.per_second.items())},
                "open_watches": open_watches, "threads": threading.active_count()}


class Store:
    # Watch events kept for resuming watches; older resourceVersions get 410.
    MAX_EVENTS = 20000

    def __init__(self, versions):
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)  # notified on every event and watch control
        self.objects = {}  # (resource, namespace, name) -> object in storage (v1) shape
        self.rv = 1000
        self.versions = list(versions)
        self.faults = Faults()
        self.requests = []
        self.stats = Stats()
        self.events = []  # [(rv, type, resource, namespace, object)] in rv order
        self.history_start = self.rv  # watches from an rv below this are told 410 Gone
        self.watchers = []  # active watch streams (dicts; see Handler.watch)
        self.bookmark_interval = 1.0
        self.deployment_controller = "off"  # "off", "ready" or "pending"

    def next_rv(self):
        self.rv += 1
        return str(self.rv)

    def record(self, etype, resource, obj):
        """Appends a watch event for obj (its resourceVersion is the event's)."""
        ns = obj.get("metadata", {}).get("namespace", "") if RESOURCES[resource][2] else ""
        self.events.append((int(obj["metadata"]["resourceVersion"]), etype, resource, ns, copy.deepcopy(obj)))
        if len(self.events) > self.MAX_EVENTS:
            drop = len(self.events) - self.MAX_EVENTS
            self.history_start = self.events[drop - 1][0]
            del self.events[:drop]
        self.changed.notify_all()

    def compact(self):
        """Forgets the event history, as etcd compaction does: every watch
        resuming from an older resourceVersion gets 410 Gone."""
        self.events = []
        self.history_start = self.rv
        self.changed.notify_all()

    def put_new(self, resource, obj, uid=None):
        """Stores obj as created: uid, resourceVersion, creationTimestamp."""
        meta = obj.setdefault("metadata", {})
        meta["uid"] = uid or str(uuid.uuid4())
        meta["resourceVersion"] = self.next_rv()
        meta["creationTimestamp"] = now_rfc3339()
        if meta.get("generation") is None and resource in ("resourceslices", "resourceclaims"):
            meta["generation"] = 1
        ns = meta.get("namespace", "") if RESOURCES[resource][2] else ""
        existed = (resource, ns, meta["name"]) in self.objects
        self.objects[(resource, ns, meta["name"])] = obj
        self.record("MODIFIED" if existed else "ADDED", resource, obj)
        return obj

    def put_update(self, resource, ns, obj):
        """Stores a changed version of an existing object under a new resourceVersion."""
        obj["metadata"]["resourceVersion"] = self.next_rv()
        self.objects[(resource, ns, obj["metadata"]["name"])] = obj
        self.record("MODIFIED", resource, obj)
        return obj

    def remove(self, resource, ns, name):
        """Deletes an object; the DELETED event carries the deletion's resourceVersion."""
        obj = self.objects.pop((resource, ns, name), None)
        rv = self.next_rv()
        if obj is not None:
            gone = copy.deepcopy(obj)
            gone["metadata"]["resourceVersion"] = rv
            self.record("DELETED", resource, gone)
        return obj

    def act_as_deployment_controller(self, deployment):
        """Gives `deployment` one pod and the status the controller and the
        kubelet would, per self.deployment_controller."""
        mode = self.deployment_controller
        if mode == "off":
            return
        meta = deployment["metadata"]
        ns, name = meta["namespace"], meta["name"]
        labels = ((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        ready = mode == "ready"
        pod_name = name + "-pod"
        if ("pods", ns, pod_name) not in self.objects:
            containers = ((deployment.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": pod_name, "namespace": ns, "labels": dict(labels),
                                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                                     "name": name, "uid": meta["uid"]}]},
                   "spec": ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {},
                   "status": {"phase": "Running",
                              "containerStatuses": [{"name": c.get("name", ""), "ready": ready}
                                                    for c in containers[:1]] or [{"name": "c", "ready": ready}]}}
            self.put_new("pods", pod)
        else:
            pod = copy.deepcopy(self.objects[("pods", ns, pod_name)])
            for cs in pod["status"]["containerStatuses"]:
                cs["ready"] = ready
            self.put_update("pods", ns, pod)
        updated = copy.deepcopy(deployment)
        updated["status"] = {"replicas": 1, "readyReplicas": 1 if ready else 0,
                             "availableReplicas": 1 if ready else 0}
        if ready:
            updated["status"]["readyReplicas"] = 1
        self.put_update("deployments", ns, updated)

    def delete_owned_pods(self, deployment):
        uid = deployment["metadata"]["uid"]
        for (r, ns, name), obj in list(self.objects.items()):
            if r == "pods" and any(o.get("uid") == uid for o in obj["metadata"].get("ownerReferences") or []):
                self.remove("pods", ns, name)

    def load_object(self, obj, keep_identity=False):
        kind = obj.get("kind", "")
        if kind.endswith("List") and "items" in obj:
            for item in obj["items"]:
                self.load_object(item, keep_identity)
            return
        if kind not in KIND_TO_RESOURCE:
            raise ValueError("cannot load object of kind %r" % kind)
        resource = KIND_TO_RESOURCE[kind]
        obj = copy.deepcopy(obj)
        if resource == "resourceslices" and obj.get("apiVersion") == RESOURCE_GROUP + "/v1beta1":
            obj["spec"]["devices"] = [device_from_v1beta1(d) for d in obj["spec"].get("devices", [])]
        meta = obj.setdefault("metadata", {})
        if not RESOURCES[resource][2]:
            meta.pop("namespace", None)
        elif not meta.get("namespace"):
            meta["namespace"] = "default"
        uid = meta.get("uid") if keep_identity else None
        with self.lock:
            cur = self.objects.get((resource, meta.get("namespace", ""), meta.get("name")))
            if cur is not None and not uid:
                # Loading an existing object without a uid updates it in place.
                uid = cur["metadata"]["uid"]
            self.put_new(resource, obj, uid)

    def load_text(self, text, keep_identity=True):
        docs = []
        stripped = text.lstrip()
        if stripped.startswith("{") or stripped.startswith("["):
            data = json.loads(text)
            docs = data if isinstance(data, list) else [data]
        else:
            if yaml is None:
                raise ValueError("YAML input needs python3-yaml")
            docs = [d for d in yaml.safe_load_all(text) if d]
        for d in docs:
            self.load_object(d, keep_identity)
        return len(docs)


def generate_tls(tls_dir, server_names="IP:127.0.0.1,DNS:localhost"):
    """Creates a CA, a server cert for `server_names` (subjectAltName form) and a client cert."""
    os.makedirs(tls_dir, exist_ok=True)

    def run(*args):
        subprocess.run(["openssl"] + list(args), check=True, cwd=tls_dir,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    if not os.path.exists(os.path.join(tls_dir, "ca.crt")):
        run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
            "-days", "2", "-subj", "/CN=nvdra-test-ca")
    for name, subj, ext in (
        ("server", "/CN=127.0.0.1",
         "subjectAltName=%s\nextendedKeyUsage=serverAuth\n" % server_names),
        ("client", "/O=system:nodes/CN=system:node:test",
         "extendedKeyUsage=clientAuth\n"),
    ):
        if os.path.exists(os.path.join(tls_dir, name + ".crt")):
            continue
        with open(os.path.join(tls_dir, name + ".ext"), "w") as f:
            f.write(ext)
        run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", name + ".key", "-out", name + ".csr",
            "-subj", subj)
        run("x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", name + ".crt", "-days", "2", "-extfile", name + ".ext")


class ApiError(Exception):
    def __init__(self, code, reason, message, details=None):
        super().__init__(message)
        self.body = status_body(code, reason, message, details)
        self.code = code


def not_found(resource, name):
    return ApiError(404, "NotFound", '%s "%s" not found' % (group_resource(resource), name),
                    {"name": name, "group": RESOURCES[resource][0], "kind": resource})


class PageNotFound(Exception):
    """The real server's answer for a path no handler serves."""


def parse_field_selector(sel, resource):
    allowed = {"metadata.name", "metadata.namespace"}
    if resource == "resourceslices":
        allowed |= {"spec.nodeName", "spec.driver", "spec.pool.name"}
    reqs = []
    for term in filter(None, sel.split(",")):
        if "!=" in term:
            k, v = term.split("!=", 1)
            neg = True
        elif "==" in term:
            k, v = term.split("==", 1)
            neg = False
        elif "=" in term:
            k, v = term.split("=", 1)
            neg = False
        else:
            raise ApiError(400, "BadRequest", 'invalid selector: \'%s\'; can\'t understand \'%s\'' % (sel, term))
        if k not in allowed:
            raise ApiError(400, "BadRequest", 'field label not supported: %s' % k)
        reqs.append((k, v, neg))
    return reqs


def field_value(obj, path):
    cur = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    return "" if cur is None else str(cur)


def parse_label_selector(sel):
    reqs = []
    for term in filter(None, (t.strip() for t in sel.split(","))):
        if "!=" in term:
            k, v = term.split("!=", 1)
            reqs.append((k.strip(), v.strip(), True))
        elif "==" in term or "=" in term:
            k, v = term.split("==", 1) if "==" in term else term.split("=", 1)
            reqs.append((k.strip(), v.strip(), False))
        else:
            reqs.append((term, None, False))  # existence
    return reqs


def labels_match(obj, reqs):
    labels = obj.get("metadata", {}).get("labels") or {}
    for k, v, neg in reqs:
        if v is None:
            if k not in labels:
                return False
        elif neg:
            if labels.get(k) == v:
                return False
        elif labels.get(k) != v:
            return False
    return True


def classify(method, path, query):
    """(verb, resource) of an API request as RBAC and audit logs name them,
    e.g. ("watch", "computedomains"); ("", "") for non-resource paths."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        rest = parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        rest = parts[3:]
    else:
        return "", ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    if not rest:
        return "", ""
    name = rest[1] if len(rest) > 1 else ""
    verb = {"GET": "get" if name else "list", "POST": "create", "PUT": "update",
            "DELETE": "delete", "PATCH": "patch"}.get(method, method.lower())
    if verb == "list" and query.get("watch", [""])[0] in ("1", "true"):
        verb = "watch"
    return verb, rest[0]


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch (also used for strategic merge patches of
    plain maps such as labels, which is all nvdra sends)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def json_pointer_parts(ptr):
    if ptr == "":
        return []
    if not ptr.startswith("/"):
        raise ApiError(422, "Invalid", "invalid JSON pointer %r" % ptr)
    return [p.replace("~1", "/").replace("~0", "~") for p in ptr[1:].split("/")]


def json_patch(doc, ops):
    """RFC 6902 JSON patch: add, remove, replace and test (the optimistic
    concurrency check clients use)."""
    doc = copy.deepcopy(doc)
    for op in ops:
        parts = json_pointer_parts(op.get("path", ""))
        if not parts:
            raise ApiError(422, "Invalid", "the root cannot be patched")
        parent = doc
        for p in parts[:-1]:
            if isinstance(parent, list):
                parent = parent[int(p)]
            elif isinstance(parent, dict) and p in parent:
                parent = parent[p]
            else:
                raise ApiError(422, "Invalid", "doc is missing path: %s" % op.get("path"))
        last = parts[-1]
        kind = op.get("op")
        if kind == "test":
            cur = parent.get(last, None) if isinstance(parent, dict) else parent[int(last)]
            if cur != op.get("value"):
                raise ApiError(422, "Invalid", "the server rejected our request due to an error in our request: "
                               "testing value %s failed" % op.get("path"))
        elif kind in ("add", "replace"):
            if isinstance(parent, list):
                parent.insert(int(last), op.get("value")) if kind == "add" else parent.__setitem__(int(last), op.get("value"))
            else:
                if kind == "replace" and last not in parent:
                    raise ApiError(422, "Invalid", "replace operation does not apply: doc is missing key: %s" % op.get("path"))
                parent[last] = op.get("value")
        elif kind == "remove":
            if isinstance(parent, list):
                parent.pop(int(last))
            elif last in parent:
                del parent[last]
            else:
                raise ApiError(422, "Invalid", "remove operation does not apply: doc is missing path: %s" % op.get("path"))
        else:
            raise ApiError(422, "Invalid", "unsupported JSON patch op %r" % kind)
    return doc


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "nvdra-test-apiserver"
    # Go's net/http (the real API server) sets TCP_NODELAY; without it the
    # separate header and body writes of a kept-alive response stall on
    # delayed ACKs for 40 ms each.
    disable_nagle_algorithm = True

    def setup(self):
        if hasattr(self.request, "do_handshake"):
            self.request.settimeout(10)
            self.request.do_handshake()
            self.request.settimeout(None)
        super().setup()

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("%s\n" % (fmt % args))

    # ---- plumbing ----
    def send_json(self, code, body, extra_headers=None):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (extra_headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def send_text(self, code, text):
        data = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def read_json(self):
        raw = self.read_body()
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError as e:
            raise ApiError(400, "BadRequest", "the body of the request was in an unknown format: %s" % e)

    def do_GET(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def do_PUT(self):
        self.dispatch("PUT")

    def do_DELETE(self):
        self.dispatch("DELETE")

    def do_PATCH(self):
        self.dispatch("PATCH")

    def client_name(self):
        """The client as its bearer token names it ("" without one)."""
        auth = self.headers.get("Authorization", "")
        return auth[len("Bearer "):] if auth.startswith("Bearer ") else ""

    def authenticated(self):
        srv = self.server
        if srv.token is None and not srv.require_client_cert:
            return True
        if srv.token is not None:
            auth = self.headers.get("Authorization", "")
            if auth == "Bearer " + srv.token_value():
                return True
        if srv.tls and hasattr(self.connection, "getpeercert"):
            if self.connection.getpeercert():
                return True
        return False

    def dispatch(self, method):
        url = urllib.parse.urlsplit(self.path)
        path = url.path
        query = urllib.parse.parse_qs(url.query)
        store = self.server.store
        try:
            if path.startswith("/_nvdra/"):
                try:
                    return self.control(method, path, query)
                except (ValueError, KeyError, OSError) as e:
                    return self.send_json(400, {"error": "%s: %s" % (type(e).__name__, e)})
            verb, resource = classify(method, path, query)
            client = self.client_name()
            with store.lock:
                store.requests.append({"method": method, "path": path, "query": url.query,
                                       "verb": verb, "resource": resource, "client": client})
                store.stats.count(client, verb or "nonresource", resource or path)
                fault = store.faults.take(method, path, verb)
            if fault:
                if fault.get("latency_ms"):
                    time.sleep(fault["latency_ms"] / 1000.0)
                if fault.get("drop"):
                    self.read_body()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if "raw_body" in fault:
                    # Bytes no JSON library here would produce (nesting deeper
                    # than Python can parse, odd shapes): sent as they are.
                    self.read_body()
                    data = fault["raw_body"].encode()
                    self.send_response(int(fault.get("status", 200)))
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                if fault.get("status"):
                    self.read_body()
                    code = int(fault["status"])
                    headers = {}
                    # Retry-After goes out verbatim (seconds, an HTTP date, or
                    # garbage), on any status that carries it.
                    retry_after = str(fault.get("retry_after", 1 if code == 429 else ""))
                    if retry_after:
                        headers["Retry-After"] = retry_after
                    if code == 429:
                        details = {"retryAfterSeconds": int(retry_after)} if retry_after.isdigit() else None
                        body = status_body(429, "TooManyRequests",
                                           "Too many requests, please try again later.", details)
                    elif code == 403:
                        body = status_body(403, "Forbidden",
                                           'injected: the caller cannot %s this resource' % method.lower())
                    elif code == 410:
                        body = status_body(410, "Expired", "too old resource version: injected")
                    elif code == 409:
                        # What a racing writer causes; lets tests hit the path deterministically.
                        body = status_body(409, "Conflict",
                                           "Operation cannot be fulfilled: the object has been modified; "
                                           "please apply your changes to the latest version and try again")
                    else:
                        body = status_body(code, "InternalError",
                                           "Internal error occurred: injected fault")
                    return self.send_json(code, body, headers)
            if not self.authenticated():
                self.read_body()
                return self.send_json(401, status_body(401, "Unauthorized", "Unauthorized"))
            self.api(method, path, query)
        except ApiError as e:
            self.send_json(e.code, e.body)
        except PageNotFound:
            self.send_text(404, "404 page not found\n")
        except (BrokenPipeError, ConnectionResetError):
            pass

    # ---- the Kubernetes API ----
    def api(self, method, path, query):
        store = self.server.store
        parts = [p for p in path.split("/") if p]
        if path in ("/healthz", "/readyz", "/livez"):
            return self.send_text(200, "ok")
        if path == "/version":
            major, minor = self.server.kube_version.split(".")
            return self.send_json(200, {"major": major, "minor": minor,
                                        "gitVersion": "v%s.0-nvdra-test" % self.server.kube_version})
        if path == "/apis":
            return self.send_json(200, {"kind": "APIGroupList", "apiVersion": "v1",
                                        "groups": [self.group_doc(RESOURCE_GROUP), self.group_doc(NVIDIA_GROUP),
                                                   self.group_doc(APPS_GROUP)]})
        if path == "/api":
            return self.send_json(200, {"kind": "APIVersions", "versions": ["v1"]})
        if parts[:1] == ["api"]:
            if len(parts) < 2 or parts[1] != "v1":
                raise PageNotFound()
            group, version, rest = "", "v1", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 2:
            group = parts[1]
            if group not in (RESOURCE_GROUP, NVIDIA_GROUP, APPS_GROUP):
                raise PageNotFound()
            if len(parts) == 2:
                return self.send_json(200, self.group_doc(group))
            version = parts[2]
            if not self.serves(group, version):
                raise PageNotFound()
            rest = parts[3:]
        else:
            raise PageNotFound()
        if not rest:
            return self.send_json(200, self.resource_list(group, version))
        namespace = ""
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        resource = rest[0]
        name = rest[1] if len(rest) > 1 else ""
        if len(rest) > 2 or resource not in RESOURCES or RESOURCES[resource][0] != group:
            raise PageNotFound()
        namespaced = RESOURCES[resource][2]
        if namespaced != bool(namespace) and not (namespaced and method == "GET" and not name):
            raise PageNotFound()
        verb = {"GET": "get" if name else "list", "POST": "create", "PUT": "update",
                "DELETE": "delete", "PATCH": "patch"}[method]
        if verb == "list" and query.get("watch", [""])[0] in ("1", "true"):
            verb = "watch"
        if (method == "POST" and name) or (method in ("PUT", "DELETE", "PATCH") and not name):
            return self.send_json(405, status_body(405, "MethodNotAllowed",
                                                   "the server does not allow this method on the requested resource"))
        if verb not in RESOURCES[resource][3]:
            self.read_body()
            return self.send_json(405, status_body(405, "MethodNotAllowed",
                                                   "the server does not allow this method on the requested resource"))
        if verb == "watch":
            # Streams without holding the store lock; it waits on store.changed.
            return self.watch(resource, group, version, namespace, query)
        with store.lock:
            if verb == "get":
                obj = store.objects.get((resource, namespace, name))
                if obj is None:
                    raise not_found(resource, name)
                return self.send_json(200, self.to_version(resource, group, version, obj))
            if verb == "list":
                return self.list(resource, group, version, namespace, query)
            if verb == "patch":
                return self.patch(resource, group, version, namespace, name)
            if verb == "create":
                return self.create(resource, group, version, namespace)
            if verb == "update":
                return self.update(resource, group, version, namespace, name)
            if verb == "delete":
                return self.delete(resource, group, version, namespace, name)

    def serves(self, group, version):
        if group == RESOURCE_GROUP:
            return version in self.server.store.versions
        if group == NVIDIA_GROUP:
            return version == "v1beta1"
        return version == "v1"

    def group_doc(self, group):
        versions = (self.server.store.versions if group == RESOURCE_GROUP else
                    ["v1"] if group == APPS_GROUP else ["v1beta1"])
        vs = [{"groupVersion": "%s/%s" % (group, v), "version": v} for v in versions]
        doc = {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": vs}
        if vs:
            doc["preferredVersion"] = vs[0]
        return doc

    def resource_list(self, group, version):
        res = []
        for plural, (g, kind, namespaced, verbs) in sorted(RESOURCES.items()):
            if g != group:
                continue
            res.append({"name": plural, "singularName": kind.lower(), "namespaced": namespaced,
                        "kind": kind, "verbs": verbs})
        gv = "%s/%s" % (group, version) if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": res}

    def api_version(self, group, version):
        return "%s/%s" % (group, version) if group else version

    def to_version(self, resource, group, version, obj):
        out = copy.deepcopy(obj)
        out["apiVersion"] = self.api_version(group, version)
        out["kind"] = RESOURCES[resource][1]
        if resource == "resourceslices" and version == "v1beta1":
            out["spec"]["devices"] = [device_to_v1beta1(d) for d in out["spec"].get("devices") or []]
        return out

    def from_version(self, resource, version, obj):
        obj = copy.deepcopy(obj)
        if resource == "resourceslices" and version == "v1beta1":
            spec = obj.get("spec") or {}
            spec["devices"] = [device_from_v1beta1(d) for d in spec.get("devices") or []]
        return obj

    def list(self, resource, group, version, namespace, query):
        store = self.server.store
        fsel = parse_field_selector(query.get("fieldSelector", [""])[0], resource)
        lsel = parse_label_selector(query.get("labelSelector", [""])[0])
        items = []
        for (r, ns, _), obj in sorted(store.objects.items()):
            if r != resource or (namespace and ns != namespace):
                continue
            if any((field_value(obj, k) == v) == neg for k, v, neg in fsel):
                continue
            if not labels_match(obj, lsel):
                continue
            item = self.to_version(resource, group, version, obj)
            item.pop("apiVersion", None)
            item.pop("kind", None)
            items.append(item)
        self.send_json(200, {"kind": RESOURCES[resource][1] + "List",
                             "apiVersion": self.api_version(group, version),
                             "metadata": {"resourceVersion": str(store.rv)}, "items": items})

    def send_chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def watch(self, resource, group, version, namespace, query):
        """A watch stream: JSON lines in HTTP chunks, as the real server's
        watch cache sends them. resourceVersion "" or "0" starts with
        synthetic ADDED events for the current objects; an older one than the
        retained history gets an ERROR event carrying a 410 Expired Status."""
        store = self.server.store
        fsel = parse_field_selector(query.get("fieldSelector", [""])[0], resource)
        lsel = parse_label_selector(query.get("labelSelector", [""])[0])
        rv_text = query.get("resourceVersion", [""])[0]
        bookmarks = query.get("allowWatchBookmarks", [""])[0] in ("true", "1")
        try:
            timeout = float(query.get("timeoutSeconds", ["1800"])[0])
        except ValueError:
            raise ApiError(400, "BadRequest", "invalid timeoutSeconds")
        try:
            rv = int(rv_text) if rv_text else 0
        except ValueError:
            raise ApiError(400, "BadRequest", 'invalid resource version: strconv.ParseUint: parsing "%s": invalid syntax' % rv_text)
        kind = RESOURCES[resource][1]
        api_version = self.api_version(group, version)

        def matches(ns, obj):
            if namespace and ns != namespace:
                return False
            if any((field_value(obj, k) == v) == neg for k, v, neg in fsel):
                return False
            return labels_match(obj, lsel)

        def line(etype, obj):
            return (json.dumps({"type": etype, "object": obj}) + "\n").encode()

        watcher = {"resource": resource, "namespace": namespace, "action": None, "client": self.client_name()}
        pending = []
        with store.lock:
            if rv and rv < store.history_start:
                gone = status_body(410, "Expired", "too old resource version: %d (%d)" % (rv, store.history_start))
                pending.append(line("ERROR", gone))
                watcher["action"] = "end"
            elif rv == 0:
                for (r, ns, _), obj in sorted(store.objects.items()):
                    if r == resource and matches(ns, obj):
                        pending.append(line("ADDED", self.to_version(resource, group, version, obj)))
                rv = store.rv
            if watcher["action"] is None:
                store.watchers.append(watcher)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.close_connection = True
        end = time.monotonic() + timeout
        next_bookmark = time.monotonic() + store.bookmark_interval
        try:
            while True:
                for data in pending:
                    self.send_chunk(data)
                pending = []
                with store.lock:
                    action = watcher["action"]
                    if action is None:
                        now = time.monotonic()
                        wait = min(end, next_bookmark) - now
                        if wait > 0 and not (store.events and store.events[-1][0] > rv):
                            store.changed.wait(wait)
                        action = watcher["action"]
                    if action is None and rv < store.history_start:
                        # History was compacted past this watch.
                        action = "expire"
                    if action is None:
                        # Events are in resourceVersion order: skip to the
                        # first one after rv (a sentinel above any type).
                        first = bisect.bisect_right(store.events, (rv, "\uffff"))
                        for erv, etype, r, ns, obj in store.events[first:]:
                            if erv <= rv or r != resource:
                                continue
                            if matches(ns, obj):
                                pending.append(line(etype, self.to_version(resource, group, version, obj)))
                        if store.events:
                            rv = max(rv, store.events[-1][0])
                        now = time.monotonic()
                        if now >= next_bookmark:
                            if bookmarks:
                                pending.append(line("BOOKMARK", {"kind": kind, "apiVersion": api_version,
                                                                 "metadata": {"resourceVersion": str(max(rv, store.rv))}}))
                                rv = max(rv, store.rv)
                            next_bookmark = now + store.bookmark_interval
                        if now >= end:
                            action = "end"
                if action == "drop":
                    # An abrupt end without the terminating chunk, as a
                    # proxy or a restarting server leaves it.
                    self.connection.shutdown(2)
                    return
                if action == "expire":
                    gone = status_body(410, "Expired", "too old resource version: %d (%d)" % (rv, store.history_start))
                    self.send_chunk(line("ERROR", gone))
                    action = "end"
                if action == "end":
                    for data in pending:
                        self.send_chunk(data)
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                    return
        except (BrokenPipeError, ConnectionResetError, OSError):
            return
        finally:
            with store.lock:
                if watcher in store.watchers:
                    store.watchers.remove(watcher)

    def patch(self, resource, group, version, namespace, name):
        """Merge, strategic-merge (maps only) and JSON patches. A
        metadata.resourceVersion in a merge patch is a precondition, as on the
        real server: a stale one is a 409 Conflict."""
        store = self.server.store
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        body = self.read_json()
        cur = store.objects.get((resource, namespace, name))
        if cur is None:
            raise not_found(resource, name)
        if ctype in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the body of the request was in an unknown format")
            want_rv = (body.get("metadata") or {}).get("resourceVersion")
            if want_rv and want_rv != cur["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict",
                               'Operation cannot be fulfilled on %s "%s": the object has been modified; '
                               'please apply your changes to the latest version and try again'
                               % (group_resource(resource), name),
                               {"name": name, "group": group, "kind": resource})
            out = merge_patch(cur, body)
        elif ctype == "application/json-patch+json":
            if not isinstance(body, list):
                raise ApiError(400, "BadRequest", "the body of the request was in an unknown format")
            out = json_patch(cur, body)
        else:
            raise ApiError(415, "UnsupportedMediaType",
                           'the body of the request was in an unknown format - accepted media types include: '
                           'application/json-patch+json, application/merge-patch+json, '
                           'application/apply-patch+yaml')
        for k in ("uid", "creationTimestamp", "name", "namespace"):
            if k in cur["metadata"]:
                out["metadata"][k] = cur["metadata"][k]
            else:
                out["metadata"].pop(k, None)
        out["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"]
        if out == cur:
            return self.send_json(200, self.to_version(resource, group, version, cur))
        store.put_update(resource, namespace, out)
        self.send_json(200, self.to_version(resource, group, version, out))

    def validate_body(self, resource, group, version, namespace, body):
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the body of the request was empty")
        kind = RESOURCES[resource][1]
        if body.get("kind") not in (None, kind) or body.get("apiVersion") not in (None, self.api_version(group, version)):
            raise ApiError(400, "BadRequest",
                           "the API version in the data (%s) does not match the expected API version (%s)"
                           % (body.get("apiVersion"), self.api_version(group, version)))
        meta = body.setdefault("metadata", {})
        if namespace:
            if meta.get("namespace") not in (None, "", namespace):
                raise ApiError(400, "BadRequest",
                               "the namespace of the provided object does not match the namespace sent on the request")
            meta["namespace"] = namespace
        if resource == "resourceslices":
            spec = body.get("spec") or {}
            errs = []
            if not spec.get("driver"):
                errs.append({"reason": "FieldValueRequired", "message": "Required value", "field": "spec.driver"})
            pool = spec.get("pool") or {}
            if not pool.get("name"):
                errs.append({"reason": "FieldValueRequired", "message": "Required value", "field": "spec.pool.name"})
            if len(spec.get("devices") or []) > 128:
                errs.append({"reason": "FieldValueTooMany", "message": "Too many: must have at most 128 items",
                             "field": "spec.devices"})
            if errs:
                name = meta.get("name") or meta.get("generateName") or ""
                msg = "%s \"%s\" is invalid: %s" % (kind, name, ", ".join(
                    "%s: %s" % (e["field"], e["message"]) for e in errs))
                raise ApiError(422, "Invalid", msg, {"name": name, "group": group, "kind": kind, "causes": errs})
        return meta

    def create(self, resource, group, version, namespace):
        store = self.server.store
        body = self.from_version(resource, version, self.read_json())
        meta = self.validate_body(resource, group, version, namespace, body)
        for k in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp"):
            meta.pop(k, None)
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise ApiError(422, "Invalid", "%s.%s \"\" is invalid: metadata.name: Required value: name or generateName is required"
                               % (RESOURCES[resource][1], group), {"kind": RESOURCES[resource][1], "group": group})
            for _ in range(10):
                candidate = meta["generateName"] + "".join(random.choice(GENERATE_NAME_ALPHABET) for _ in range(5))
                if (resource, namespace, candidate) not in store.objects:
                    break
            meta["name"] = candidate
        elif (resource, namespace, meta["name"]) in store.objects:
            raise ApiError(409, "AlreadyExists", '%s "%s" already exists' % (group_resource(resource), meta["name"]),
                           {"name": meta["name"], "group": group, "kind": resource})
        body.pop("status", None) if resource in ("resourceclaims", "deployments") else None
        obj = store.put_new(resource, body)
        answer = self.to_version(resource, group, version, obj)
        if resource == "deployments":
            # Acts before answering, so a client's next read sees the result.
            store.act_as_deployment_controller(obj)
        self.send_json(201, answer)

    def update(self, resource, group, version, namespace, name):
        store = self.server.store
        body = self.from_version(resource, version, self.read_json())
        meta = self.validate_body(resource, group, version, namespace, body)
        if meta.get("name") != name:
            raise ApiError(400, "BadRequest", "the name of the object (%s) does not match the name on the URL (%s)"
                           % (meta.get("name"), name))
        cur = store.objects.get((resource, namespace, name))
        if cur is None:
            raise not_found(resource, name)
        rv = meta.get("resourceVersion")
        kind = RESOURCES[resource][1]
        if not rv:
            raise ApiError(422, "Invalid",
                           '%s.%s "%s" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update'
                           % (kind, group, name), {"name": name, "group": group, "kind": kind})
        if rv != cur["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict",
                           'Operation cannot be fulfilled on %s "%s": the object has been modified; '
                           'please apply your changes to the latest version and try again'
                           % (group_resource(resource), name),
                           {"name": name, "group": group, "kind": resource})
        for k in ("uid", "creationTimestamp"):
            meta[k] = cur["metadata"].get(k)
        if "generation" in cur["metadata"]:
            meta["generation"] = cur["metadata"]["generation"]
            if body.get("spec") != cur.get("spec"):
                meta["generation"] += 1
        if body == cur or (body.get("spec") == cur.get("spec") and
                           {k: v for k, v in meta.items() if k != "resourceVersion"} ==
                           {k: v for k, v in cur["metadata"].items() if k != "resourceVersion"}):
            # A no-op update keeps the resourceVersion, as the real server does.
            return self.send_json(200, self.to_version(resource, group, version, cur))
        store.put_update(resource, namespace, body)
        self.send_json(200, self.to_version(resource, group, version, body))

    def delete(self, resource, group, version, namespace, name):
        store = self.server.store
        opts = self.read_json() or {}
        cur = store.objects.get((resource, namespace, name))
        if cur is None:
            raise not_found(resource, name)
        pre = opts.get("preconditions") or {}
        details = {"name": name, "group": group, "kind": resource}
        if pre.get("uid") and pre["uid"] != cur["metadata"]["uid"]:
            raise ApiError(409, "Conflict", "Operation cannot be fulfilled on %s \"%s\": Precondition failed: "
                           "UID in precondition: %s, UID in object meta: %s"
                           % (group_resource(resource), name, pre["uid"], cur["metadata"]["uid"]), details)
        if pre.get("resourceVersion") and pre["resourceVersion"] != cur["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "Operation cannot be fulfilled on %s \"%s\": Precondition failed: "
                           "ResourceVersion in precondition: %s, ResourceVersion in object meta: %s"
                           % (group_resource(resource), name, pre["resourceVersion"],
                              cur["metadata"]["resourceVersion"]), details)
        store.remove(resource, namespace, name)
        if resource == "deployments":
            # Any propagation policy: the pods go with it (the garbage
            # collector's foreground deletion, done at once).
            store.delete_owned_pods(cur)
        self.send_json(200, self.to_version(resource, group, version, cur))

    # ---- control plane for tests ----
    def control(self, method, path, query):
        store = self.server.store
        body = self.read_json() or {}
        with store.lock:
            if path == "/_nvdra/load":
                n = 0
                if "path" in body:
                    with open(body["path"]) as f:
                        n += store.load_text(f.read(), keep_identity=body.get("keep_uid", True))
                for obj in body.get("objects", []):
                    store.load_object(obj, keep_identity=body.get("keep_uid", True))
                    n += 1
                return self.send_json(200, {"loaded": n})
            if path == "/_nvdra/delete":
                found = store.remove(body["resource"], body.get("namespace", ""), body["name"]) is not None
                return self.send_json(200 if found else 404, {"deleted": found})
            if path == "/_nvdra/replace":
                # The object is deleted and recreated under the same name: new uid.
                key = (body["resource"], body.get("namespace", ""), body["name"])
                cur = store.objects.get(key)
                if cur is None:
                    return self.send_json(404, {"error": "no such object"})
                obj = copy.deepcopy(cur)
                if "set" in body:
                    for k, v in body["set"].items():
                        obj[k] = v
                store.remove(*key)
                store.put_new(body["resource"], obj)
                return self.send_json(200, {"uid": obj["metadata"]["uid"]})
            if path == "/_nvdra/faults":
                if body.get("clear"):
                    store.faults.rules = []
                for rule in body.get("rules", []):
                    store.faults.add(rule)
                return self.send_json(200, {"rules": len(store.faults.rules)})
            if path == "/_nvdra/versions":
                if "versions" in body:
                    store.versions = [v for v in RESOURCE_VERSIONS if v in body["versions"]]
                return self.send_json(200, {"versions": store.versions})
            if path == "/_nvdra/requests":
                out = list(store.requests)
                if body.get("clear") or query.get("clear"):
                    store.requests = []
                return self.send_json(200, {"requests": out})
            if path == "/_nvdra/objects":
                res = body.get("resource") or query.get("resource", [""])[0]
                items = [o for (r, _, _), o in sorted(store.objects.items()) if not res or r == res]
                return self.send_json(200, {"items": items})
            if path == "/_nvdra/watches":
                # {"action": "drop"|"expire"|"end", "resource": r}: acts on
                # the open watch streams (of r, or all); "compact": true drops
                # the event history (later resumes get 410);
                # "bookmark_interval": seconds between BOOKMARK events.
                if "bookmark_interval" in body:
                    store.bookmark_interval = float(body["bookmark_interval"])
                if body.get("compact"):
                    store.compact()
                n = 0
                if body.get("action"):
                    for w in store.watchers:
                        if not body.get("resource") or w["resource"] == body["resource"]:
                            w["action"] = body["action"]
                            n += 1
                    store.changed.notify_all()
                active = [{"resource": w["resource"], "namespace": w["namespace"]} for w in store.watchers]
                return self.send_json(200, {"affected": n, "active": active})
            if path == "/_nvdra/counts":
                # Requests per verb and resource, e.g. {"list": {"computedomains": 1}}.
                counts = {}
                for r in store.requests:
                    if r.get("verb"):
                        per = counts.setdefault(r["verb"], {})
                        per[r["resource"]] = per.get(r["resource"], 0) + 1
                if body.get("clear"):
                    store.requests = []
                return self.send_json(200, {"counts": counts})
            if path == "/_nvdra/stats":
                out = store.stats.snapshot(store.watchers)
                if body.get("clear") or query.get("clear"):
                    store.stats.clear()
                return self.send_json(200, out)
            if path == "/_nvdra/deployments":
                if "controller" in body:
                    if body["controller"] not in ("off", "ready", "pending"):
                        return self.send_json(400, {"error": "controller must be off, ready or pending"})
                    store.deployment_controller = body["controller"]
                    for (r, _, _), obj in list(store.objects.items()):
                        if r == "deployments":
                            store.act_as_deployment_controller(obj)
                return self.send_json(200, {"controller": store.deployment_controller})
            if path == "/_nvdra/token":
                self.server.token = body["token"]
                return self.send_json(200, {})
        return self.send_json(404, {"error": "unknown control path " + path})


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # A real API server listens with the kernel's full backlog; Python's
    # default of 5 drops connections that arrive together (SYN retries of 1 s).
    request_queue_size = 1024

    def token_value(self):
        return self.token


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: ephemeral)")
    ap.add_argument("--port-file", help="write the chosen port here once listening")
    ap.add_argument("--tls-dir", help="serve HTTPS; CA, server and client certs are created here if absent")
    ap.add_argument("--token", help="require this bearer token (or a client certificate with --tls-dir)")
    ap.add_argument("--tls-names", default="IP:127.0.0.1,DNS:localhost",
                    help="with --tls-dir: the server certificate's subjectAltName, e.g. DNS:localhost")
    ap.add_argument("--require-client-cert", action="store_true",
                    help="with --tls-dir: require a client certificate signed by the CA (or --token)")
    ap.add_argument("--versions", default=",".join(RESOURCE_VERSIONS),
                    help="resource.k8s.io versions served, e.g. v1beta1")
    ap.add_argument("--load", action="append", default=[], help="JSON or YAML file of objects to load at start")
    ap.add_argument("--kubeconfig-out", help="write a kubeconfig for this server here")
    ap.add_argument("--kube-version", default="1.34", help="the Kubernetes version /version answers (major.minor)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()

    store = Store([v for v in RESOURCE_VERSIONS if v in args.versions.split(",")])
    for path in args.load:
        with open(path) as f:
            store.load_text(f.read())

    server = Server(("127.0.0.1", args.port), Handler)
    server.store = store
    server.verbose = args.verbose
    server.kube_version = args.kube_version
    server.token = args.token
    server.require_client_cert = bool(args.require_client_cert)
    server.tls = bool(args.tls_dir)
    if args.tls_dir:
        generate_tls(args.tls_dir, args.tls_names)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.path.join(args.tls_dir, "server.crt"), os.path.join(args.tls_dir, "server.key"))
        ctx.load_verify_locations(os.path.join(args.tls_dir, "ca.crt"))
        ctx.verify_mode = ssl.CERT_OPTIONAL
        # The handshake runs in the handler thread (setup), so one slow or
        # failing client cannot stall the accept loop.
        server.socket = ctx.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    port = server.server_address[1]
    scheme = "https" if args.tls_dir else "http"
    url = "%s://127.0.0.1:%d" % (scheme, port)
    if args.kubeconfig_out:
        write_kubeconfig(args.kubeconfig_out, url, args.tls_dir, args.token)
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.rename(tmp, args.port_file)
    print("READY %s" % url, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


def write_kubeconfig(path, url, tls_dir, token):
    cluster = {"server": url}
    user = {}
    if tls_dir:
        with open(os.path.join(tls_dir, "ca.crt"), "rb") as f:
            cluster["certificate-authority-data"] = base64.b64encode(f.read()).decode()
        user["client-certificate"] = os.path.join(os.path.abspath(tls_dir), "client.crt")
        user["client-key"] = os.path.join(os.path.abspath(tls_dir), "client.key")
    if token:
        user["token"] = token
    cfg = {
        "apiVersion": "v1", "kind": "Config", "current-context": "nvdra-test",
        "clusters": [{"name": "nvdra-test", "cluster": cluster}],
        "users": [{"name": "nvdra-test", "user": user}],
        "contexts": [{"name": "nvdra-test", "context": {"cluster": "nvdra-test", "user": "nvdra-test"}}],
    }
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2)  # JSON is valid YAML


if __name__ == "__main__":
    main()
