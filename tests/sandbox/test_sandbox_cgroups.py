"""Which cgroup hierarchy plays which role: parsing and choice, on described machines."""

from __future__ import annotations

from sandbox.cgroups import (
    HOST_LEAF,
    PARENT_NAME,
    CgroupMount,
    owner_alive,
    parse_mountinfo,
    parse_proc_cgroup,
    plan_layout,
    sandbox_cgroup_name,
)

HYBRID_MOUNTINFO = """\
24 30 0:22 / /sys rw,nosuid - sysfs sysfs rw
35 24 0:30 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755
36 35 0:31 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu
37 35 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
38 35 0:33 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
39 35 0:34 / /sys/fs/cgroup/freezer rw - cgroup cgroup rw,freezer
40 35 0:35 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd
41 35 0:36 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
42 30 0:37 / /mnt/with\\040space rw - ext4 /dev/sda1 rw
"""
HYBRID_CGROUP = """\
9:name=systemd:/
8:pids:/
6:freezer:/
4:memory:/process_api/abc
1:cpu:/
0::/
"""


def test_parse_mountinfo_finds_v1_and_v2() -> None:
    mounts = parse_mountinfo(HYBRID_MOUNTINFO)
    by_point = {m.mountpoint: m for m in mounts}
    assert by_point["/sys/fs/cgroup/memory"].controllers == {"memory"}
    assert by_point["/sys/fs/cgroup/unified"].version == 2
    assert "/sys/fs/cgroup/systemd" not in by_point  # named hierarchy, no controller
    assert all(m.mountpoint.startswith("/sys/fs/cgroup") for m in mounts)


def test_parse_mountinfo_unescapes_paths() -> None:
    text = "1 2 0:1 / /sys/fs/cgroup/my\\040dir rw - cgroup2 cgroup2 rw\n"
    assert parse_mountinfo(text)[0].mountpoint == "/sys/fs/cgroup/my dir"


def test_parse_proc_cgroup() -> None:
    v2, v1 = parse_proc_cgroup(HYBRID_CGROUP)
    assert v2 == "/"
    assert v1["memory"] == "/process_api/abc" and v1["pids"] == "/"
    assert "name=systemd" not in v1


def test_hybrid_machine_uses_v2_kill_and_v1_limits() -> None:
    v2, v1 = parse_proc_cgroup(HYBRID_CGROUP)
    layout = plan_layout(parse_mountinfo(HYBRID_MOUNTINFO), v2, v1, frozenset())
    roles = {h.parent: set(h.roles) for h in layout.hierarchies}
    assert roles == {
        f"/sys/fs/cgroup/unified/{PARENT_NAME}": {"kill"},
        f"/sys/fs/cgroup/memory/process_api/abc/{PARENT_NAME}": {"memory"},
        f"/sys/fs/cgroup/pids/{PARENT_NAME}": {"pids"},
    }
    assert layout.kill_mechanism == "cgroup.kill"


def test_v1_only_machine_freezes_to_kill() -> None:
    mounts = [m for m in parse_mountinfo(HYBRID_MOUNTINFO) if m.version == 1]
    _, v1 = parse_proc_cgroup(HYBRID_CGROUP)
    layout = plan_layout(mounts, None, v1, frozenset())
    assert layout.kill_mechanism == "freezer"
    assert layout.provides("memory") and layout.provides("pids")


def test_pure_v2_with_delegation_puts_everything_in_one_place() -> None:
    mounts = [CgroupMount(2, "/sys/fs/cgroup", "/", frozenset())]
    layout = plan_layout(mounts, "/user.slice/app", {}, frozenset({"memory", "pids"}))
    assert len(layout.hierarchies) == 1
    h = layout.hierarchies[0]
    assert h.parent == f"/sys/fs/cgroup/user.slice/app/{PARENT_NAME}"
    assert h.roles == {"kill", "memory", "pids"}


def test_pure_v2_without_delegation_has_no_limits() -> None:
    mounts = [CgroupMount(2, "/sys/fs/cgroup", "/", frozenset())]
    layout = plan_layout(mounts, "/user.slice/app", {}, frozenset())
    assert layout.provides("kill") and not layout.provides("memory")


def test_a_host_in_its_leaf_plans_from_its_delegation() -> None:
    """Having moved itself into a leaf (cgroup v2's no internal processes), a host (or a
    sibling host moved along with it) makes sandboxes beside the leaf, not inside it."""
    mounts = [CgroupMount(2, "/sys/fs/cgroup", "/", frozenset())]
    own = f"/user.slice/app.scope/{HOST_LEAF}"
    layout = plan_layout(mounts, own, {}, frozenset({"memory", "pids"}))
    assert [h.parent for h in layout.hierarchies] == [
        f"/sys/fs/cgroup/user.slice/app.scope/{PARENT_NAME}"
    ]


def test_an_ordinary_user_uses_what_was_delegated() -> None:
    """Rootless on a hybrid machine: no v2 of its own to write (the root cgroup), v1
    subtrees handed over (``sandvisor-USER``), used as the parents themselves."""
    v2, _ = parse_proc_cgroup(HYBRID_CGROUP)
    delegated = {
        "memory": "/sys/fs/cgroup/memory/sandvisor-alice",
        "pids": "/sys/fs/cgroup/pids/sandvisor-alice",
    }
    mounts = parse_mountinfo(HYBRID_MOUNTINFO)
    layout = plan_layout(mounts, v2, {}, frozenset(), delegated_v1=delegated, v2_ours=False)
    roles = {h.parent: set(h.roles) for h in layout.hierarchies}
    assert roles == {delegated["memory"]: {"memory"}, delegated["pids"]: {"pids"}}
    assert layout.kill_mechanism == "pid namespace"
    # nothing delegated: nothing at all (the v2 root is not the user's either)
    bare = plan_layout(mounts, v2, {}, frozenset(), v2_ours=False)
    assert bare.hierarchies == ()


def test_an_ordinary_user_with_a_delegated_v2_cgroup_gets_everything_there() -> None:
    mounts = [CgroupMount(2, "/sys/fs/cgroup", "/", frozenset())]
    own = "/user.slice/user-1000.slice/user@1000.service/app.slice/run-x.scope"
    layout = plan_layout(mounts, own, {}, frozenset({"memory", "pids"}), v2_ours=True)
    assert [set(h.roles) for h in layout.hierarchies] == [{"kill", "memory", "pids"}]


def test_no_cgroups_at_all() -> None:
    layout = plan_layout([], None, {}, frozenset())
    assert layout.hierarchies == () and layout.kill_mechanism == "pid namespace"


def test_cgroup_namespace_root_is_honoured() -> None:
    mounts = [CgroupMount(1, "/sys/fs/cgroup/pids", "/outer", frozenset({"pids"}))]
    layout = plan_layout(mounts, None, {"pids": "/outer/inner"}, frozenset())
    assert layout.hierarchies[0].parent == f"/sys/fs/cgroup/pids/inner/{PARENT_NAME}"
    hidden = plan_layout(mounts, None, {"pids": "/elsewhere"}, frozenset())
    assert hidden.hierarchies == ()


def test_names_say_whose_sandbox_it_is() -> None:
    name = sandbox_cgroup_name(1234, generation=7)
    assert name.startswith("sv-") and name.split("-")[3:5] == ["7", "1234"]
    assert owner_alive(name)  # we are alive
    assert not owner_alive("sv-999999999-1-1-1234-abcd")  # no such host
    assert owner_alive("something-else")  # not ours to collect
