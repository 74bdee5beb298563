"""Attack cases shared by the suites that attack a real sandbox server: each is a function of `run(code, **fields)
-> result`, so that the same case runs against a server on this host (test_sandbox_attacks.py) and against one in a
pyxis/enroot container on the local Slurm (test_slurm_sandbox_container.py). The network cases need the test and the
server on one network stack (true of both: enroot does not give the container a network namespace of its own)."""

from __future__ import annotations

import socket
import threading
import time

# the limits both suites start the server with (small, so that the limit cases end fast)
LIMITS = ["--memory_gb", "1", "--file_size_mb", "64", "--tmp_size_mb", "128", "--processes", "32"]


def connect_to_a_port_the_test_listens_on_fails(run) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(2)
    port = listener.getsockname()[1]
    got = []
    threading.Thread(target=lambda: got.append(_accept(listener)), daemon=True).start()
    code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)"
    res = run(code)
    assert res["status"] == "error" and "Network is unreachable" in res["stderr"], res
    time.sleep(2.2)
    assert got == [None], "the listener saw a connection from the sandbox"
    listener.close()


def _accept(listener):
    try:
        return listener.accept()
    except OSError:
        return None


def outside_addresses_and_dns_are_unreachable(run) -> None:
    code = (
        "import socket\nfor target in [('1.1.1.1', 80), ('deb.debian.org', 80), ('pypi.org', 443)]:\n"
        "    try:\n        socket.create_connection(target, timeout=2)\n        print('CONNECTED', target)\n"
        "    except OSError as e:\n        print('blocked', e.errno)\n"
        "print(sorted(name for _, name in socket.if_nameindex()))"
    )
    res = run(code)
    assert "CONNECTED" not in res["stdout"] and res["stdout"].count("blocked") == 3, res
    assert res["stdout"].endswith("['lo']\n"), res


def raw_sockets_are_refused(run) -> None:
    res = run("import socket\nsocket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)")
    assert res["status"] == "error" and "PermissionError" in res["stderr"], res


def files_it_must_not_see(run, secret: str, checkout_file: str) -> None:
    """`secret`: a file the server's side can read, which the code must not; `checkout_file`: one of the code the
    server runs from."""
    code = (
        "import os\nfor path in ['/etc/shadow', '/etc/gshadow', '/root/.ssh', '/home', '/var', '/sys/kernel', "
        f"'/proc/1/environ', {secret!r}, {checkout_file!r}]:\n"
        "    try:\n        print(path, 'READ', open(path).read()[:20])\n"
        "    except OSError as e:\n        print(path, type(e).__name__)\n"
        "print(sorted(p for p in os.listdir('/proc') if p.isdigit()))"
    )
    res = run(code)
    assert "READ" not in res["stdout"].replace("/proc/1/environ READ", ""), res  # its own environ is its own
    assert "top secret" not in res["stdout"], res
    assert res["stdout"].splitlines()[-1] == "['1']", res  # only itself in its PID namespace


def writing_the_host_filesystem_fails(run) -> None:
    code = (
        "import os\nfor path in ['/usr/evil', '/etc/passwd', '/bin/sh', '/evil']:\n    try:\n"
        "        open(path, 'a').write('x')\n        print(path, 'WROTE')\n"
        "    except OSError as e:\n        print(path, e.strerror)\n"
        "try:\n    os.chmod('/etc/passwd', 0o666)\n    print('chmod WROTE')\n"
        "except OSError as e:\n    print('chmod', e.strerror)"
    )
    res = run(code)
    lines = res["stdout"].splitlines()
    assert len(lines) == 5 and all(line.endswith(("Read-only file system", "Permission denied")) for line in lines), res


def many_files_fill_only_the_private_tmp(run) -> None:
    code = "for i in range(100):\n    with open(f'/tmp/f{i}', 'wb') as f:\n        f.write(b'x' * 60 * 2**20)"
    res = run(code, timeout=30)
    assert res["status"] == "error" and "No space left" in res["stderr"], res
    again = run("import os\nprint(os.listdir('/tmp'))")
    assert again["stdout"] == "[]\n", again  # the next execution gets a new, empty /tmp


def big_file_write_hits_the_file_size_limit(run) -> None:
    code = "with open('big', 'wb') as f:\n    for _ in range(1024):\n        f.write(b'x' * 2**20)"
    res = run(code, timeout=30)
    assert res["status"] == "error" and "File too large" in res["stderr"], res


def thread_bomb_hits_the_process_limit(run) -> None:
    code = (
        "import threading, time\nn = 0\ntry:\n    while True:\n"
        "        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n        n += 1\n"
        "except RuntimeError as e:\n    print('stopped after', n, e)"
    )
    res = run(code, timeout=10)
    assert "stopped after" in res["stdout"] and int(res["stdout"].split()[2]) < 32, res


NETWORK = [
    connect_to_a_port_the_test_listens_on_fails,
    outside_addresses_and_dns_are_unreachable,
    raw_sockets_are_refused,
]
FILESYSTEM = [
    files_it_must_not_see,
    writing_the_host_filesystem_fails,
    many_files_fill_only_the_private_tmp,
    big_file_write_hits_the_file_size_limit,
]
