"""An upstream RocketMQ cluster (name server, broker, 5.x proxy) started from ``ROCKETMQ_HOME``.

txmq's rocketmq mode and its front ends claim upstream's behaviour; the way to hold them to it is to run
upstream beside them. This module starts the three processes of an official binary distribution (or a
build laid out like one) on free loopback ports, with configuration files and a store of its own in a
work directory, and ends them with the process that started them:

- each process is started through the distribution's own scripts (``bin/mqnamesrv -c``, ``bin/mqbroker
  -c``, ``bin/mqproxy -pc -pm cluster -n``), which ``exec`` the JVM, so the child *is* the JVM;
- on Linux each child gets SIGKILL when this process dies, however it dies (``PR_SET_PDEATHSIG``); the
  kernel ties that to the thread that forked the child, so every start forks from one thread that lives
  until :meth:`UpstreamCluster.stop`;
- ``stop`` sends SIGTERM, then SIGKILL after a grace time (upstream's proxy often ignores SIGTERM).

Broker settings are upstream's ``BrokerConfig``/``MessageStoreConfig`` keys (``transactionTimeOut``,
``transactionCheckInterval``, ``transactionCheckMax``...); proxy settings are keys of ``rmq-proxy.json``
(``ProxyConfig``). The broker listens on its port, on port - 2 (the "fast" remoting server,
``NettyServerConfig`` via ``BrokerController.initializeRemotingServer``) and on port + 1 (HA), so the
ports are chosen as a free block.

Usage::

    with UpstreamCluster(home, workdir, broker={"transactionCheckInterval": "2000"}) as cluster:
        cluster.create_topic("orders", "TRANSACTION")
        endpoint = cluster.proxy_endpoint            # for 5.x gRPC clients
        cluster.restart_broker()                     # a crash: SIGKILL broker and proxy, start them again
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType

from txmq import proc
from txmq.errors import BrokerUnavailableError, ConfigError, ToolMissingError, WriteRefusedError
from txmq.upstream.tracing import agent_option, writable_trace

LOOPBACK = "127.0.0.1"
CLUSTER_NAME = "DefaultCluster"
BROKER_NAME = "broker-a"
TOPIC_ATTEMPTS = 3  # tries of mqadmin updateTopic (create_topic)
PROXY_ATTEMPTS = 3  # starts of a proxy that exits while starting (start_process)
# What each process prints on its standard output once it serves (NamesrvStartup, BrokerStartup after the
# broker registered with the name server, ProxyStartup).
_READY = {"namesrv": "boot success", "broker": "boot success", "proxy": "startup successfully"}
_SCRIPTS = {"namesrv": "mqnamesrv", "broker": "mqbroker", "proxy": "mqproxy"}
_STOP_GRACE_S = 5.0
# A traced broker is given time to finish its shutdown, which writes the trace's END (the agent's hook runs
# after BrokerController.shutdown; on a loaded machine it took longer than the grace above).
_TRACED_STOP_GRACE_S = 90.0
# JVM options for the processes that only start, route and relay (the name server, the proxy, mqadmin):
# the quick (C1) compiler only. Measured here, CPU seconds: the name server's start 5.0 -> 2.3, the
# proxy's 8.2 -> 5.1, an mqadmin updateTopic 2.4 -> 1.4; idle, either way about 0.6 and 0.9 a minute.
# Not the broker: with C1 alone its polling services (timer wheel, reput, pop buffer) cost 23 CPU s a
# minute idle instead of 6.
_QUICK_JVM = "-XX:TieredStopAtLevel=1"
# Upstream's broker refuses every put once the disk holding its store is this full, whatever its
# configuration says: DefaultMessageStore.CleanCommitLogService.getDiskSpaceWarningLevelRatio caps
# diskSpaceWarningLevelRatio at 0.90.
DISK_FULL_RATIO = 0.90


def disk_use(path: Path) -> float:
    """How full the disk holding ``path`` is, computed as upstream computes it
    (``UtilAll.getDiskPartitionSpaceUsedPercent``: used / (used + usable), rounded up to a hundredth), so
    that the refusal below and the broker's agree."""
    stat = os.statvfs(path)
    used = (stat.f_blocks - stat.f_bfree) * stat.f_frsize
    entire = used + stat.f_bavail * stat.f_frsize
    if entire <= 0:
        return 0.0
    return -(-used * 100 // entire) / 100


def refuse_a_full_disk(path: Path) -> None:
    """A broker started on a disk at least 90% full serves, but refuses every message ("service not
    available now ... the broker's disk is full"): every run on it fails late, in the middle of a workload.
    This says so before any process starts."""
    used = disk_use(path)
    if used >= DISK_FULL_RATIO:
        raise WriteRefusedError(
            f"the disk holding {path} is {used:.0%} full, and upstream's broker refuses every message at "
            f"{DISK_FULL_RATIO:.0%} (DefaultMessageStore.CleanCommitLogService caps "
            f"diskSpaceWarningLevelRatio there): free some space, or give a work directory on another disk")


def rocketmq_home(value: str | None = None) -> Path:
    """The distribution named by ``value`` or ``$ROCKETMQ_HOME``, checked; a one-line error otherwise."""
    raw = value if value is not None else os.environ.get("ROCKETMQ_HOME", "")
    if not raw:
        raise ToolMissingError("ROCKETMQ_HOME is not set: point it at a RocketMQ 5.x binary distribution "
                               "(the folder with bin/mqnamesrv, bin/mqbroker, bin/mqproxy, lib/)")
    home = Path(raw).expanduser()
    scripts = (*_SCRIPTS.values(), "mqadmin")
    missing = [f"bin/{name}" for name in scripts if not (home / "bin" / name).is_file()]
    if missing:
        raise ToolMissingError(f"ROCKETMQ_HOME={raw} is not a RocketMQ distribution: no {', '.join(missing)}")
    return home.resolve()


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def free_port_block(size: int, start: int = 20000, stop: int = 60000, step: int = 7) -> int:
    """The first port of ``size`` consecutive free loopback ports (free when asked: another process may
    still take one before the cluster binds it, which the start then reports)."""
    for first in range(start + (os.getpid() * 37) % 5000, stop - size, step):
        if all(_port_free(first + i) for i in range(size)):
            return first
    raise BrokerUnavailableError(f"no {size} consecutive free ports on {LOOPBACK}")


def _java_value(value: object) -> str:
    """A setting as a Java properties file writes it (``true``, not Python's ``True``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)



class _ExitedWhileStarting(BrokerUnavailableError):
    """A process of the cluster ended before it served."""

class UpstreamCluster:
    """One name server, one broker (master) and one 5.x proxy in cluster mode, on loopback."""

    # What ``start`` starts, in turn; a subclass without the proxy serves 4.x clients only.
    PROCESSES: tuple[str, ...] = ("namesrv", "broker", "proxy")

    def __init__(self, home: Path, workdir: Path, broker: Mapping[str, object] | None = None,
                 proxy: Mapping[str, object] | None = None, start_timeout_s: float = 180,
                 base_port: int | None = None, trace: Path | None = None) -> None:
        self.home = home
        # The broker's trace (txmq.upstream.tracing), checked now: an unwritable path fails before any start.
        self.trace = writable_trace(trace) if trace is not None else None
        self._agent = ""
        self.workdir = workdir.resolve()
        self.start_timeout_s = start_timeout_s
        # Seven ports from ``base_port`` (fixed: a restarted cluster keeps its endpoints), or free ones.
        base = base_port if base_port is not None else free_port_block(7)
        self.namesrv_port = base
        self.broker_port = base + 3          # base+1 is its fast port, base+4 its HA port
        self.proxy_port = base + 6
        self.proxy_remoting_port = base + 5
        self.broker_settings = dict(broker or {})
        self.proxy_settings = dict(proxy or {})
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._forker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="upstream-launch")

    @property
    def namesrv_addr(self) -> str:
        """The name server, for 4.x clients and mqadmin (``-n``)."""
        return f"{LOOPBACK}:{self.namesrv_port}"

    @property
    def broker_addr(self) -> str:
        """The broker's remoting address."""
        return f"{LOOPBACK}:{self.broker_port}"

    @property
    def proxy_endpoint(self) -> str:
        """The proxy's gRPC endpoint, for 5.x clients."""
        return f"{LOOPBACK}:{self.proxy_port}"

    @property
    def store_dir(self) -> Path:
        """The broker's store (commit log, consume queues, checkpoints)."""
        return self.workdir / "store"

    @property
    def logs(self) -> Path:
        """Each process's standard output (``<name>.out``) and upstream's own logs."""
        return self.workdir / "logs"

    def __enter__(self) -> UpstreamCluster:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        """Write the configuration files, then start the name server, the broker and the proxy in turn,
        each once the one before it serves; a failed start ends what was started and says why."""
        for sub in ("conf", "logs", "store", "namesrv", "home"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        refuse_a_full_disk(self.store_dir)
        self._write_configs()
        if self.trace is not None and not self._agent:
            self._agent = agent_option(self.home, self.trace)
        try:
            for name in self.PROCESSES:
                self.start_process(name)
        except BaseException:
            self.stop()
            raise

    def _write_configs(self) -> None:
        conf = self.workdir / "conf"
        (conf / "namesrv.conf").write_text(
            f"listenPort={self.namesrv_port}\nbindAddress={LOOPBACK}\n"
            f"kvConfigPath={self.workdir}/namesrv/kvConfig.json\n"
            f"configStorePath={self.workdir}/namesrv/namesrv.properties\n")
        broker = {
            "brokerClusterName": CLUSTER_NAME, "brokerName": BROKER_NAME, "brokerId": "0",
            "brokerRole": "ASYNC_MASTER", "flushDiskType": "ASYNC_FLUSH", "brokerIP1": LOOPBACK,
            "bindAddress": LOOPBACK, "listenPort": str(self.broker_port),
            "haListenPort": str(self.broker_port + 1), "namesrvAddr": self.namesrv_addr,
            "storePathRootDir": str(self.store_dir), "storePathCommitLog": str(self.store_dir / "commitlog"),
            "mappedFileSizeCommitLog": str(64 << 20), "autoCreateTopicEnable": "true",
            "autoCreateSubscriptionGroup": "true",
        } | {key: _java_value(value) for key, value in self.broker_settings.items()}
        (conf / "broker.conf").write_text("".join(f"{key}={value}\n" for key, value in broker.items()))
        proxy: dict[str, object] = {
            "rocketMQClusterName": CLUSTER_NAME, "namesrvAddr": self.namesrv_addr, "proxyMode": "cluster",
            "grpcServerPort": self.proxy_port, "remotingListenPort": self.proxy_remoting_port,
            "localServeAddr": LOOPBACK,
            # The proxy's local remoting-to-gRPC bridge is not needed for gRPC clients.
            "enableRemotingLocalProxyGrpc": False,
        } | self.proxy_settings
        (conf / "rmq-proxy.json").write_text(json.dumps(proxy, indent=2) + "\n")

    def _argv(self, name: str) -> list[str]:
        script = str(self.home / "bin" / _SCRIPTS[name])
        conf = self.workdir / "conf"
        if name == "proxy":
            return [script, "-pc", str(conf / "rmq-proxy.json"), "-pm", "cluster", "-n", self.namesrv_addr]
        return [script, "-c", str(conf / f"{name}.conf")]

    def _port(self, name: str) -> int:
        return {"namesrv": self.namesrv_port, "broker": self.broker_port, "proxy": self.proxy_port}[name]

    def _env(self, name: str) -> dict[str, str]:
        """The distribution's scripts' environment for process ``name`` (or ``mqadmin``): logs and the JVM's
        home inside the work directory, and ``_QUICK_JVM`` but for the broker, whose JVM gets the trace
        agent's ``-javaagent`` instead when traced (before the user's own ``JAVA_OPT_EXT``, which can
        override it)."""
        quick = self._agent if name == "broker" else _QUICK_JVM
        user = os.environ.get("JAVA_OPT_EXT", "")
        return os.environ | {
            "RMQ_LOG_DIR": str(self.logs), "ROCKETMQ_HOME": str(self.home),
            "JAVA_OPT_EXT": f"{quick} {user} -Duser.home={self.workdir / 'home'}",
        }

    def _spawn(self, name: str) -> subprocess.Popen[bytes]:
        out = self.logs / f"{name}.out"
        with open(out, "ab") as log:
            log.write(f"--- start {time.strftime('%H:%M:%S')}\n".encode())
            log.flush()
            return proc.popen(self._argv(name), stdout=log, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, cwd=self.workdir, env=self._env(name),
                              start_new_session=True)

    def start_process(self, name: str) -> None:
        """Start one of ``namesrv``, ``broker``, ``proxy`` and wait until it serves. The proxy is started
        again if it exits while starting: ``ProxyStartup`` gives up when the broker does not answer its
        creation of a system topic in time (``AbstractSystemMessageSyncer.createSysTopic``), which a
        loaded machine makes happen (twice in a row at a load average of 40)."""
        attempts = PROXY_ATTEMPTS if name == "proxy" else 1
        for attempt in range(attempts):
            try:
                self._start_once(name)
                return
            except _ExitedWhileStarting:
                if attempt == attempts - 1:
                    raise

    def _start_once(self, name: str) -> None:
        out = self.logs / f"{name}.out"
        seen = out.stat().st_size if out.exists() else 0
        child = self._forker.submit(self._spawn, name).result()
        self.procs[name] = child
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if child.poll() is not None:
                refused = [line for line in out.read_bytes()[seen:].decode(errors="replace").splitlines()
                           if line.startswith("txmq agent: ")]
                if refused:  # the trace agent's one line (an upstream whose code moved, an unwritable trace)
                    raise BrokerUnavailableError(f"upstream {name}: {refused[-1]}")
                raise _ExitedWhileStarting(f"upstream {name} exited with {child.returncode} while "
                                           f"starting; see {out}")
            if _READY[name] in out.read_bytes()[seen:].decode(errors="replace") and self._serves(name):
                return
            time.sleep(0.25)
        raise BrokerUnavailableError(f"upstream {name} did not come up within {self.start_timeout_s:g} s; "
                                     f"see {out}")

    def _serves(self, name: str) -> bool:
        try:
            with socket.create_connection((LOOPBACK, self._port(name)), timeout=1):
                return True
        except OSError:
            return False

    def kill_process(self, name: str) -> None:
        """SIGKILL one process (a crash) and reap it."""
        child = self.procs.pop(name, None)
        if child is not None and child.poll() is None:
            child.kill()
            child.wait()

    def restart_broker(self) -> None:
        """A broker crash: SIGKILL the broker and the proxy in front of it, then start the broker and, once
        it has registered again, the proxy."""
        self.kill_process("proxy")
        self.kill_process("broker")
        self.start_process("broker")
        self.start_process("proxy")

    def stop(self) -> None:
        """End every process: SIGTERM, then SIGKILL after a grace time; proxy first, name server last."""
        for name in ("proxy", "broker", "namesrv"):
            child = self.procs.pop(name, None)
            if child is None or child.poll() is not None:
                continue
            child.terminate()
            traced = name == "broker" and self.trace is not None
            try:
                child.wait(_TRACED_STOP_GRACE_S if traced else _STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        self._forker.shutdown(wait=False)

    def create_topic(self, topic: str, message_type: str = "TRANSACTION", queues: int = 4) -> None:
        """Create (or update) a topic with its 5.x message type through upstream's ``mqadmin updateTopic``;
        a 5.x proxy routes transactional producers' checks only for TRANSACTION topics."""
        if not re.fullmatch(r"[%A-Za-z0-9_-]{1,127}", topic):
            raise ConfigError(f"topic {topic!r}: letters, digits, '%', '_' and '-' only")
        for attempt in range(TOPIC_ATTEMPTS):  # idempotent; a loaded machine times mqadmin's calls out
            try:
                self.mqadmin("updateTopic", "-c", CLUSTER_NAME, "-t", topic, "-r", str(queues), "-w",
                             str(queues), "-a", f"+message.type={message_type}")
                return
            except BrokerUnavailableError:
                if attempt == TOPIC_ATTEMPTS - 1:
                    raise

    def mqadmin(self, *args: str, timeout_s: float = 120) -> str:
        """Run ``bin/mqadmin COMMAND -n <name server> ARGS...``; its output, or an error naming it."""
        command, *rest = args
        argv = [str(self.home / "bin" / "mqadmin"), command, "-n", self.namesrv_addr, *rest]
        done = proc.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                        env=self._env("mqadmin"), timeout=timeout_s, cwd=self.workdir)
        # mqadmin exits 0 when its command failed (MQAdminStartup.main0 prints the SubCommandException's
        # stack trace to stderr): a topic that was never created showed up only as sends failing to
        # find its route
        if done.returncode != 0 or "Exception" in done.stdout or "SubCommandException" in done.stderr:
            last = (done.stdout + done.stderr).strip().splitlines()[-3:]
            raise BrokerUnavailableError(f"mqadmin {command} failed: {' / '.join(last)}")
        return str(done.stdout)

