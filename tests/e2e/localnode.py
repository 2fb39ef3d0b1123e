"""A local node for end-to-end runs: the test API server, nvdra's kubelet
plugins (real binaries, real sockets, real files) and nvdractl as the
kubelet. Used by the end-to-end tests and by the README's local-node demo.

Nothing here reaches into a plugin: every interaction goes through the
plugin's gRPC sockets (via nvdractl), the API server's REST interface, or
files a real node would have (the CDI directory, the ledger via nvdractl).
"""

import json
import os
import shlex
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("NVDRA_BIN_DIR", os.path.join(ROOT, "build", "bin"))
APISERVER = os.path.join(ROOT, "tests", "apiserver", "nvdra_test_apiserver.py")
# A command every nvdra program runs through: the programs of another
# architecture under user-mode emulation, e.g.
# "qemu-aarch64-static -L build-arm64/sysroot" with NVDRA_BIN_DIR=build-arm64/bin.
EXEC_WRAPPER = shlex.split(os.environ.get("NVDRA_EXEC_WRAPPER", ""))

GPU_DRIVER = "gpu.nvidia.com"
CD_DRIVER = "compute-domain.nvidia.com"
BINARIES = {
    GPU_DRIVER: "nvdra-gpu-kubelet-plugin",
    CD_DRIVER: "nvdra-compute-domain-kubelet-plugin",
}


def wait_for(predicate, timeout=30.0, what="condition", max_delay=0.2):
    """Polls `predicate` until it returns a truthy value; fails after `timeout`.

    Polling a condition with a deadline (not sleeping a fixed time) is how
    these tests wait for another process. `max_delay` bounds the pause
    between polls (a test that measures how soon something happens polls
    often)."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError("timed out waiting for " + what)
        time.sleep(delay)
        delay = min(delay * 2, max_delay)


def chroot_command(root, binds, command):
    """A command line that runs `command` as root of a directory of its own:
    a tmpfs at `root` in a private mount namespace with the host's /usr (and
    /bin, /lib, ... as the host has them) and /dev, and `binds`, a list of
    (host path, path inside) bound there. What a container sees of its own
    root (nothing this machine has at /driver-root, say) without an image."""
    setup = ['mount -t tmpfs nvdra-root "$R"', 'mkdir -p "$R/usr" "$R/dev" "$R/tmp"',
             'mount --rbind /usr "$R/usr"', 'mount --rbind /dev "$R/dev"']
    for top in ("bin", "sbin", "lib", "lib64"):
        if os.path.islink("/" + top):
            setup.append('ln -s %s "$R/%s"' % (shlex.quote(os.readlink("/" + top)), top))
        elif os.path.isdir("/" + top):
            setup.append('mkdir "$R/%s" && mount --rbind /%s "$R/%s"' % (top, top, top))
    for host, inside in binds:
        setup.append('mkdir -p "$R"%s && mount --rbind %s "$R"%s' % (shlex.quote(inside), shlex.quote(host),
                                                                    shlex.quote(inside)))
    script = "set -e; R=$1; shift; " + "; ".join(setup) + '; exec chroot "$R" "$@"'
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", root] + list(command)


def read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


class ApiServer:
    def __init__(self, workdir, node_name, tls=False, kube_version=None, port=0):
        """`tls`: serve HTTPS and require a client certificate, as a real
        cluster does; the kubeconfig then carries the CA and the client's
        certificate. `kube_version`: what /version answers ("1.35").
        `port`: the port to listen on (0: any free one), e.g. the one of a
        server that was stopped, to bring it back where clients look."""
        self.workdir = workdir
        self.port_file = os.path.join(workdir, "apiserver.port")
        self.kubeconfig = os.path.join(workdir, "kubeconfig")
        self.log = open(os.path.join(workdir, "apiserver.log"), "a")
        args = [sys.executable, APISERVER, "--port-file", self.port_file, "--kubeconfig-out", self.kubeconfig]
        if port:
            if os.path.exists(self.port_file):
                os.remove(self.port_file)
            args += ["--port", str(port)]
        if kube_version:
            args += ["--kube-version", kube_version]
        self.ssl = None
        if tls:
            tls_dir = os.path.join(workdir, "tls")
            args += ["--tls-dir", tls_dir, "--require-client-cert"]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(lambda: read_text(self.port_file).strip(), what="the test API server")
        self.port = int(read_text(self.port_file).strip())
        self.url = "%s://127.0.0.1:%d" % ("https" if tls else "http", self.port)
        if tls:
            self.ssl = ssl.create_default_context(cafile=os.path.join(tls_dir, "ca.crt"))
            self.ssl.load_cert_chain(os.path.join(tls_dir, "client.crt"), os.path.join(tls_dir, "client.key"))
        wait_for(lambda: os.path.exists(self.kubeconfig), what="kubeconfig")
        self.load([{
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": node_name, "uid": str(uuid.uuid4())},
        }])

    def request(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10, context=self.ssl) as resp:
                return resp.status, json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    def load(self, objects):
        status, body = self.request("POST", "/_nvdra/load", {"objects": objects})
        assert status == 200, body

    def delete(self, resource, namespace, name):
        return self.request("POST", "/_nvdra/delete", {"resource": resource, "namespace": namespace, "name": name})

    def slices(self, driver=None):
        status, body = self.request("GET", "/apis/resource.k8s.io/v1/resourceslices")
        assert status == 200, body
        items = body.get("items", [])
        if driver:
            items = [s for s in items if s["spec"]["driver"] == driver]
        return items

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def make_claim(name, results, namespace="default", configs=None, uid=None, reserved_for=None):
    """A resource.k8s.io/v1 ResourceClaim, allocated as the scheduler would.

    reserved_for: the pods (name, uid) in status.reservedFor, as the
    scheduler and the resourceclaim controller keep it. By default one pod,
    "<name>-pod": the kubelet prepares a claim only for a pod it is reserved
    for. [] leaves reservedFor out."""
    uid = uid or str(uuid.uuid4())
    if reserved_for is None:
        reserved_for = [(name + "-pod", str(uuid.uuid5(uuid.NAMESPACE_URL, "pod/" + uid)))]
    claim = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "spec": {"devices": {"requests": [{"name": r["request"], "exactly": {"deviceClassName": "gpu.nvidia.com"}}
                                          for r in results]}},
        "status": {"allocation": {"devices": {
            "results": [{"request": r["request"], "driver": r["driver"], "pool": r["pool"], "device": r["device"]}
                        for r in results],
            "config": configs or [],
        }}},
    }
    if reserved_for:
        claim["status"]["reservedFor"] = [{"resource": "pods", "name": n, "uid": u} for n, u in reserved_for]
    return claim


def opaque_config(driver, parameters, requests=None, source="FromClaim"):
    c = {"source": source, "opaque": {"driver": driver, "parameters": parameters}}
    if requests:
        c["requests"] = requests
    return c


class Plugin:
    """One kubelet plugin process."""

    def __init__(self, node, driver, profile, rolling_update_id="", extra_args=None, env=None, name=None,
                 reconcile_period=1, wrapper=None):
        self.node = node
        self.driver = driver
        self.profile = profile
        self.rolling_update_id = rolling_update_id
        self.extra_args = list(extra_args or [])
        self.env = dict(env or {})
        self.name = name or (driver.split(".")[0] + ("-" + rolling_update_id if rolling_update_id else ""))
        self.proc = None
        self.log_path = os.path.join(node.workdir, self.name + ".log")
        self.reconcile_period = reconcile_period
        # Runs the plugin through this command (e.g. ["unshare", "-m"]: a
        # private mount namespace for the mounts a plugin makes).
        self.wrapper = list(wrapper or [])
        self.starts = 0

    @property
    def plugin_dir(self):
        return os.path.join(self.node.plugins_dir, self.driver)

    @property
    def dra_socket(self):
        sock = "dra-%s.sock" % self.rolling_update_id if self.rolling_update_id else "dra.sock"
        return os.path.join(self.plugin_dir, sock)

    @property
    def reg_socket(self):
        if self.rolling_update_id:
            return os.path.join(self.node.registry_dir, "%s-%s-reg.sock" % (self.driver, self.rolling_update_id))
        return os.path.join(self.node.registry_dir, "%s-reg.sock" % self.driver)

    def start(self, env=None, wait=True):
        args = self.wrapper + EXEC_WRAPPER + [os.path.join(BIN, BINARIES[self.driver]),
                "--node-name", self.node.node_name,
                "--kubeconfig", self.node.api.kubeconfig,
                "--cdi-root", self.node.cdi_root,
                "--kubelet-plugins-directory-path", self.node.plugins_dir,
                "--kubelet-registrar-directory-path", self.node.registry_dir,
                "--mock-hardware", self.profile,
                "--mock-state-dir", self.node.mock_state_dir(self.driver),
                "--boot-id-path", self.node.boot_id_path]
        if self.node.mock_layout != "plain":
            args += ["--mock-layout", self.node.mock_layout]
        # Defaults a test may override through extra_args (the plugin
        # refuses a flag given twice).
        for flag, value in (("--reconcile-period", str(self.reconcile_period)), ("--completed-claim-grace", "600"), ("-v", "4")):
            spellings = ("-v", "--v") if flag == "-v" else (flag,)
            if not any(a == f or a.startswith(f + "=") for a in self.extra_args for f in spellings):
                args += [flag, value]
        args += self.extra_args
        if self.rolling_update_id:
            args += ["--rolling-update-id", self.rolling_update_id]
        e = dict(os.environ)
        e.pop("NVDRA_FAILPOINTS", None)
        e.update(self.env)
        e.update(env or {})
        self.starts += 1
        self.log = open(self.log_path, "a")
        self.log.write("==== start %d %s\n" % (self.starts, " ".join(args)))
        self.log.flush()
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, env=e)
        if wait:
            self.wait_registered()
        return self

    def wait_registered(self, timeout=30):
        def ready():
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited with %s; log:\n%s" % (self.name, self.proc.returncode, self.read_log()))
            if not (os.path.exists(self.reg_socket) and os.path.exists(self.dra_socket)):
                return False
            r = self.node.ctl(["register", "--socket", self.reg_socket], check=False)
            return r.returncode == 0
        wait_for(ready, timeout, "plugin %s to register" % self.name)

    def read_log(self):
        with open(self.log_path) as f:
            return f.read()

    def wait_exit(self, timeout=10):
        """Waits for a plugin that is expected to die (an armed crash failpoint)."""
        self.proc.wait(timeout)
        self.log.close()
        return self.proc.returncode

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc:
            self.log.close()
        return self.proc.returncode if self.proc else None

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return None

    # The kubelet's calls.
    def prepare(self, claims, api="v1"):
        return self.node.kubelet_call("prepare", self.dra_socket, claims, api)

    def unprepare(self, claims, api="v1"):
        return self.node.kubelet_call("unprepare", self.dra_socket, claims, api)

    def ledger(self):
        r = self.node.ctl(["ledger", "show", "--json", self.plugin_dir])
        return json.loads(r.stdout)


class NodeDirs:
    """A node's directories under one root, as the kubelet's and the host's:
    plugins, plugins_registry, the CDI root, and a boot ID file with a new
    boot ID."""

    def __init__(self, root):
        self.plugins_dir = os.path.join(root, "plugins")
        self.registry_dir = os.path.join(root, "plugins_registry")
        self.cdi_root = os.path.join(root, "cdi")
        self.boot_id_path = os.path.join(root, "boot_id")
        for d in (self.plugins_dir, self.registry_dir, self.cdi_root):
            os.makedirs(d, exist_ok=True)
        self.set_boot_id(str(uuid.uuid4()))

    def set_boot_id(self, boot_id):
        with open(self.boot_id_path, "w") as f:
            f.write(boot_id + "\n")


class LocalNode(NodeDirs):
    def __init__(self, workdir=None, node_name="node-1", tls=False, kube_version=None, mock_layout="plain"):
        """mock_layout: "plain", each plugin's mock hardware in a directory of
        its own that is its driver root; "gpu-operator", one mock node root
        (mock_root) that both plugins share, laid out as the GPU operator lays
        out a node: the driver under run/nvidia/driver, device nodes on its
        dev/, the toolkit in usr/local/nvidia/toolkit, the validator's marker
        in run/nvidia/validations (docs/mock-hardware.md)."""
        self.owned = workdir is None
        self.workdir = workdir or tempfile.mkdtemp(prefix="nvdra-node-")
        self.node_name = node_name
        self.mock_layout = mock_layout
        self.mock_root = os.path.join(self.workdir, "node") if mock_layout == "gpu-operator" else None
        NodeDirs.__init__(self, self.workdir)
        self.api = ApiServer(self.workdir, node_name, tls=tls, kube_version=kube_version)
        self.plugins = []

    def mock_state_dir(self, driver):
        return self.mock_root or os.path.join(self.workdir, "mock-" + driver)

    def build_mock_node(self, profile):
        """Lays the mock node out before any plugin starts (the GPU operator's
        driver container and validator having run): nvdra-discover builds
        it as the plugins do."""
        r = subprocess.run([os.path.join(BIN, "nvdra-discover"), "--mock-hardware", profile, "--mock-root",
                            self.mock_root, "--mock-layout", self.mock_layout], capture_output=True, text=True,
                           timeout=60)
        if r.returncode != 0:
            raise RuntimeError("nvdra-discover failed (%d): %s%s" % (r.returncode, r.stdout, r.stderr))

    def plugin(self, driver, profile, **kw):
        p = Plugin(self, driver, profile, **kw)
        self.plugins.append(p)
        return p

    def ctl(self, args, check=True, timeout=60):
        r = subprocess.run(EXEC_WRAPPER + [os.path.join(BIN, "nvdractl")] + args, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode not in (0,):
            raise RuntimeError("nvdractl %s failed (%d): %s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
        return r

    def kubelet_call(self, verb, socket, claims, api):
        """claims: list of (namespace, name, uid). Returns {uid: {"devices": [...], "error": str}}."""
        args = [verb, "--socket", socket, "--api", api] + ["%s/%s/%s" % c for c in claims]
        r = self.ctl(args, check=False)
        if r.returncode not in (0, 1):
            raise RuntimeError("nvdractl %s: rpc failed (%d): %s%s" % (verb, r.returncode, r.stdout, r.stderr))
        return parse_claims_output(r.stdout)

    def cdi_files(self):
        return sorted(os.listdir(self.cdi_root))

    def close(self):
        for p in self.plugins:
            try:
                p.stop()
            except Exception:
                pass
        self.api.stop()
        if self.owned and not os.environ.get("NVDRA_KEEP_WORKDIR"):
            shutil.rmtree(self.workdir, ignore_errors=True)


def parse_claims_output(text):
    """nvdractl's JSON output -> {uid: {"devices": [...], "error": str}}."""
    data = json.loads(text)
    out = {}
    for c in data.get("claims", []):
        error = c.get("error", "") or ""
        if c.get("missing"):
            error = error or "claim missing from the plugin's answer"
        out[c["uid"]] = {"devices": c.get("devices", []) or [], "error": error}
    return out
