"""An in-memory Hugging Face Hub on 127.0.0.1 for tests: the HTTP endpoints that `huggingface_hub`'s real client
(2.4, with `HF_HUB_DISABLE_XET=1`) calls to create repos and branches, negotiate upload modes, upload LFS objects,
commit, and to list and download files (`snapshot_download`, `hf_hub_download`, `from_pretrained`).

Point the client at it with `HF_ENDPOINT=hub.endpoint` (read when `huggingface_hub` is imported, so set it in a
subprocess's environment). `fail_on` names endpoints that answer 500, to test errors in the middle of a push.
"""

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from fnmatch import fnmatch
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

import yaml

LFS_PATTERNS = ("*.safetensors", "*.bin", "*.pt", "*.pth", "*.h5", "*.hdf5", "*.msgpack", "*.onnx", "*.npz")
GITATTRIBUTES = "".join(f"{pattern} filter=lfs diff=lfs merge=lfs -text\n" for pattern in LFS_PATTERNS).encode()
LFS_POINTER_SIZE = 134
REPO = r"(?P<repo>[\w.-]+/[\w.-]+)"


def git_blob_id(content: bytes) -> str:
    """The git object id of a blob, which the Hub reports as a regular file's oid and ETag."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def is_lfs_path(path: str) -> bool:
    return any(fnmatch(path, pattern) for pattern in LFS_PATTERNS)


class HubHttpError(Exception):
    """An error answer: status, message, and the `X-Error-Code` the client maps to its exceptions."""

    def __init__(self, status: int, message: str, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


@dataclass
class Repo:
    """Commits as complete trees (path -> bytes), branch heads, visibility."""

    private: bool
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)

    def commit(self, branch: str, tree: dict[str, bytes], summary: str) -> str:
        parent = self.branches.get(branch, "")
        digest = hashlib.sha1(parent.encode() + summary.encode())
        for path in sorted(tree):
            digest.update(path.encode() + b"\0" + hashlib.sha256(tree[path]).digest())
        oid = digest.hexdigest()
        self.commits[oid], self.branches[branch] = dict(tree), oid
        return oid

    def resolve(self, revision: str) -> str:
        if revision in self.branches:
            return self.branches[revision]
        if revision in self.commits:
            return revision
        raise HubHttpError(404, f"Invalid rev id: {revision}", "RevisionNotFound")


class LocalHub:
    """The server and its state. `files` maps extra plain URL paths (e.g. original checkpoints) to bytes."""

    def __init__(self, token: str = "hf_local_test_token"):
        self.token = token
        self.repos: dict[str, Repo] = {}
        self.lfs_objects: dict[str, bytes] = {}
        self.files: dict[str, bytes] = {}
        self.fail_on: set[str] = set()
        self.requests: list[tuple[str, str]] = []
        self.unhandled: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> "LocalHub":
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._server.shutdown()
        self._server.server_close()

    def tree(self, repo_id: str, revision: str = "main") -> dict[str, bytes]:
        """A copy of the files of `repo_id` at `revision`."""
        repo = self.repos[repo_id]
        return dict(repo.commits[repo.resolve(revision)])

    # -- routing ---------------------------------------------------------------------------------------------------

    def routes(self):
        return [
            ("POST", r"/api/repos/create", self.create_repo),
            ("POST", rf"/api/models/{REPO}/branch/(?P<branch>[^/]+)", self.create_branch),
            ("POST", r"/api/validate-yaml", self.validate_yaml),
            ("POST", rf"/api/models/{REPO}/preupload/(?P<rev>[^/]+)", self.preupload),
            ("POST", rf"/{REPO}\.git/info/lfs/objects/batch", self.lfs_batch),
            ("PUT", r"/lfs-objects/(?P<oid>[0-9a-f]{64})", self.lfs_upload),
            ("POST", r"/lfs-verify", self.lfs_verify),
            ("POST", rf"/api/models/{REPO}/commit/(?P<rev>[^/]+)", self.commit),
            ("GET", rf"/api/models/{REPO}(?:/revision/(?P<rev>[^/]+))?", self.model_info),
            ("GET", rf"/api/models/{REPO}/tree/(?P<rev>[^/]+)(?:/(?P<path>.*))?", self.list_tree),
            ("HEAD", rf"/{REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)", self.resolve_file),
            ("GET", rf"/{REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)", self.resolve_file),
            ("GET", r"/api/agent-harnesses", self.agent_harnesses),
            ("GET", r"/files/(?P<path>.+)", self.static_file),
        ]

    def dispatch(self, request: "_Request") -> tuple[int, dict[str, str], bytes]:
        with self.lock:
            self.requests.append((request.method, request.path))
            for method, pattern, handler in self.routes():
                match = re.fullmatch(pattern, request.path)
                if match and method == request.method:
                    name = handler.__name__
                    if name in self.fail_on:
                        raise HubHttpError(500, f"Internal Error (simulated failure of {name})")
                    return handler(request, **{k: unquote(v) for k, v in match.groupdict().items() if v is not None})
            self.unhandled.append((request.method, request.path))
        raise HubHttpError(404, f"{request.method} {request.path} is not implemented by the local Hub")

    # -- helpers ---------------------------------------------------------------------------------------------------

    def _require_auth(self, request: "_Request") -> None:
        if request.headers.get("authorization") != f"Bearer {self.token}":
            raise HubHttpError(401, "Invalid credentials in Authorization header")

    def _repo(self, request: "_Request", repo_id: str) -> Repo:
        repo = self.repos.get(repo_id)
        if repo is None or (repo.private and request.headers.get("authorization") != f"Bearer {self.token}"):
            raise HubHttpError(404, f"Repository Not Found for url: {request.path}.", "RepoNotFound")
        return repo

    @staticmethod
    def _json(payload, status: int = 200, headers: dict[str, str] | None = None):
        return status, {"Content-Type": "application/json", **(headers or {})}, json.dumps(payload).encode()

    def _file_entry(self, path: str, content: bytes) -> dict:
        entry = {"type": "file", "path": path, "size": len(content), "oid": git_blob_id(content)}
        if is_lfs_path(path):
            sha256 = hashlib.sha256(content).hexdigest()
            entry["lfs"] = {"oid": sha256, "size": len(content), "pointerSize": LFS_POINTER_SIZE}
        return entry

    # -- write endpoints -------------------------------------------------------------------------------------------

    def create_repo(self, request: "_Request"):
        self._require_auth(request)
        body = request.json()
        repo_id = f"{body.get('organization') or 'local-user'}/{body['name']}"
        if body.get("type", "model") != "model":
            raise HubHttpError(400, "The local Hub stores model repos only")
        if repo_id in self.repos:
            return self._json(
                {"error": "You already created this model repo", "url": f"{self.endpoint}/{repo_id}"}, 409
            )
        repo = self.repos[repo_id] = Repo(private=body.get("visibility") == "private" or bool(body.get("private")))
        repo.commit("main", {".gitattributes": GITATTRIBUTES}, "initial commit")
        return self._json({"url": f"{self.endpoint}/{repo_id}", "name": repo_id})

    def create_branch(self, request: "_Request", repo: str, branch: str):
        self._require_auth(request)
        target = self._repo(request, repo)
        if branch in target.branches:
            raise HubHttpError(409, f"Reference already exists: refs/heads/{branch}")
        target.branches[branch] = target.resolve(request.json().get("startingPoint") or "main")
        return self._json({})

    def validate_yaml(self, request: "_Request"):
        content = request.json()["content"]
        match = re.match(r"^---\n(.*?)\n---\n", content, re.DOTALL)
        try:
            metadata = yaml.safe_load(match.group(1)) if match else {}
        except yaml.YAMLError as error:
            return self._json({"errors": [{"message": f"Invalid YAML: {error}"}]}, 400)
        if not isinstance(metadata, dict):
            return self._json({"errors": [{"message": "YAML metadata must be a mapping"}]}, 400)
        return self._json({"warnings": [] if metadata else [{"message": "empty or missing yaml metadata"}]})

    def preupload(self, request: "_Request", repo: str, rev: str):
        self._require_auth(request)
        target = self._repo(request, repo)
        tree = target.commits[target.resolve(rev)]
        files = []
        for item in request.json()["files"]:
            lfs = is_lfs_path(item["path"]) or b"\0" in base64.b64decode(item["sample"])
            existing = tree.get(item["path"])
            oid = None
            if existing is not None:
                oid = hashlib.sha256(existing).hexdigest() if lfs else git_blob_id(existing)
            files.append(
                {"path": item["path"], "uploadMode": "lfs" if lfs else "regular", "shouldIgnore": False, "oid": oid}
            )
        return self._json({"files": files, "commitOid": target.resolve(rev)})

    def lfs_batch(self, request: "_Request", repo: str):
        self._require_auth(request)
        self._repo(request, repo)
        objects = []
        for item in request.json()["objects"]:
            answer = {"oid": item["oid"], "size": item["size"], "authenticated": True}
            if item["oid"] not in self.lfs_objects:
                answer["actions"] = {
                    "upload": {"href": f"{self.endpoint}/lfs-objects/{item['oid']}"},
                    "verify": {"href": f"{self.endpoint}/lfs-verify"},
                }
            objects.append(answer)
        return self._json({"transfer": "basic", "objects": objects})

    def lfs_upload(self, request: "_Request", oid: str):
        if hashlib.sha256(request.body).hexdigest() != oid:
            raise HubHttpError(400, f"Uploaded content does not match oid {oid}")
        self.lfs_objects[oid] = request.body
        return 200, {}, b""

    def lfs_verify(self, request: "_Request"):
        self._require_auth(request)
        body = request.json()
        stored = self.lfs_objects.get(body["oid"])
        if stored is None or len(stored) != body["size"]:
            raise HubHttpError(404, f"LFS object {body['oid']} was not uploaded")
        return self._json({})

    def commit(self, request: "_Request", repo: str, rev: str):
        self._require_auth(request)
        target = self._repo(request, repo)
        if rev not in target.branches:
            raise HubHttpError(404, f"Invalid rev id: {rev}", "RevisionNotFound")
        tree = dict(target.commits[target.branches[rev]])
        summary = ""
        for line in request.body.splitlines():
            item = json.loads(line)
            key, value = item["key"], item["value"]
            if key == "header":
                summary = value["summary"]
            elif key == "file":
                tree[value["path"]] = base64.b64decode(value["content"])
            elif key == "lfsFile":
                if value["oid"] not in self.lfs_objects:
                    raise HubHttpError(422, f"LFS object {value['oid']} for {value['path']} was not uploaded")
                tree[value["path"]] = self.lfs_objects[value["oid"]]
            elif key == "deletedFile":
                if tree.pop(value["path"], None) is None:
                    raise HubHttpError(404, f"Cannot delete {value['path']}: no such file", "EntryNotFound")
            else:
                raise HubHttpError(400, f"The local Hub does not implement commit operation {key!r}")
        oid = target.commit(rev, tree, summary)
        return self._json({"commitUrl": f"{self.endpoint}/{repo}/commit/{oid}", "commitOid": oid, "success": True})

    # -- read endpoints --------------------------------------------------------------------------------------------

    def model_info(self, request: "_Request", repo: str, rev: str = "main"):
        target = self._repo(request, repo)
        oid = target.resolve(rev)
        siblings = [{"rfilename": path} for path in sorted(target.commits[oid])]
        return self._json({"id": repo, "modelId": repo, "sha": oid, "private": target.private, "siblings": siblings})

    def list_tree(self, request: "_Request", repo: str, rev: str, path: str = ""):
        target = self._repo(request, repo)
        tree = target.commits[target.resolve(rev)]
        prefix = f"{path.strip('/')}/" if path.strip("/") else ""
        entries = [
            self._file_entry(name, content) for name, content in sorted(tree.items()) if name.startswith(prefix)
        ]
        if prefix and not entries:
            raise HubHttpError(404, f"{path} does not exist on {rev}", "EntryNotFound")
        return self._json(entries)

    def resolve_file(self, request: "_Request", repo: str, rev: str, path: str):
        target = self._repo(request, repo)
        oid = target.resolve(rev)
        content = target.commits[oid].get(path)
        if content is None:
            raise HubHttpError(404, f"Entry not found: {path}", "EntryNotFound")
        entry = self._file_entry(path, content)
        etag = entry["lfs"]["oid"] if "lfs" in entry else entry["oid"]
        headers = {"X-Repo-Commit": oid, "ETag": f'"{etag}"', "Accept-Ranges": "bytes"}
        if "lfs" in entry:
            headers.update({"X-Linked-Etag": f'"{etag}"', "X-Linked-Size": str(len(content))})
        return _ranged(request, content, headers)

    def agent_harnesses(self, request: "_Request"):
        """The registry the client fetches for its user-agent string; empty = no agent detection."""
        return self._json({"standardEnvVars": [], "harnesses": {}})

    def static_file(self, request: "_Request", path: str):
        if path not in self.files:
            raise HubHttpError(404, f"No file {path}")
        return _ranged(request, self.files[path], {"ETag": f'"{hashlib.sha256(self.files[path]).hexdigest()}"'})


def _ranged(request: "_Request", content: bytes, headers: dict[str, str]):
    """The whole content, or the part a `Range: bytes=a-b` header asks for (downloads resume this way)."""
    match = re.fullmatch(r"bytes=(\d+)-(\d*)", request.headers.get("range", ""))
    if not match:
        return 200, headers, content
    start, end = int(match[1]), int(match[2]) if match[2] else len(content) - 1
    headers = {**headers, "Content-Range": f"bytes {start}-{end}/{len(content)}"}
    return 206, headers, content[start : end + 1]


@dataclass
class _Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body or b"{}")


def _make_handler(hub: LocalHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _read_body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0], 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                pass
            return b"".join(chunks)

        def _handle(self) -> None:
            request = _Request(
                method=self.command,
                path=urlsplit(self.path).path,
                headers={key.lower(): value for key, value in self.headers.items()},
                body=self._read_body(),
            )
            try:
                status, headers, body = hub.dispatch(request)
            except HubHttpError as error:
                status, body = error.status, json.dumps({"error": error.message}).encode()
                headers = {"Content-Type": "application/json", "X-Error-Message": error.message}
                if error.code:
                    headers["X-Error-Code"] = error.code
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_HEAD = _handle

        def log_message(self, format: str, *args) -> None:  # keep test output quiet
            pass

    return Handler
