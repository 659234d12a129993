"""Link profiles between virtual nodes: what `--link 1g` means and how it is put on a veth.

The profiles are data (links.yaml next to this file). A profile is applied to one network device
with `tc qdisc ... tbf` (a token bucket that holds the line rate) and, where the kernel has
sch_netem, a netem child that adds a fixed delay. What took effect is returned, never assumed:
a kernel without sch_netem gets the rate but not the delay, and `up` says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from hpclab.core import commands
from hpclab.core.errors import HpclabError

PROFILES_FILE = Path(__file__).with_name("links.yaml")
ETHERNET_FRAME = 1514  # bytes on the wire per full-size frame (MTU 1500 + header)
QUEUE_MS = 50  # how long a queue may get at line rate before tbf drops; TCP backs off before


@dataclass(frozen=True)
class LinkProfile:
    """One link class: rate in Mbit/s (None: unshaped), one-way delay and bucket depth in us."""

    name: str
    rate_mbit: float | None
    delay_us: float
    burst_us: float
    about: str

    @property
    def shaped(self) -> bool:
        return self.rate_mbit is not None

    @property
    def rate_bytes_per_s(self) -> float | None:
        """Line rate in bytes/s (MB = 10^6 bytes, as pingpong reports), or None if unshaped."""
        return None if self.rate_mbit is None else self.rate_mbit * 1e6 / 8

    def burst_bytes(self) -> int:
        """Token bucket depth: burst_us at line rate, at least two full frames (tbf needs one)."""
        assert self.rate_bytes_per_s is not None
        return max(int(self.rate_bytes_per_s * self.burst_us / 1e6), 2 * ETHERNET_FRAME)

    def limit_bytes(self) -> int:
        """Queue length in bytes: QUEUE_MS at line rate, and never below a few bursts."""
        assert self.rate_bytes_per_s is not None
        return max(int(self.rate_bytes_per_s * QUEUE_MS / 1e3), 4 * self.burst_bytes())


def load_profiles(path: Path = PROFILES_FILE) -> dict[str, LinkProfile]:
    """All profiles in the YAML file, by name. Raises HpclabError on a malformed file."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise HpclabError(f"cannot read the link profiles in {path}: {e}", "restore the file from git")
    if not isinstance(data, dict) or not data:
        raise HpclabError(f"{path} holds no link profiles", "restore the file from git")
    profiles = {}
    for name, p in data.items():
        name = str(name)
        try:
            rate = p["rate_mbit"]
            prof = LinkProfile(name, None if rate is None else float(rate), float(p["delay_us"]),
                               float(p["burst_us"]), str(p["about"]))
        except (TypeError, KeyError, ValueError) as e:
            raise HpclabError(f"link profile '{name}' in {path} is malformed ({e!r})",
                              "each profile needs rate_mbit, delay_us, burst_us and about")
        if (prof.rate_mbit is not None and prof.rate_mbit <= 0) or prof.delay_us < 0 or prof.burst_us < 0:
            raise HpclabError(f"link profile '{name}' in {path} has a negative or zero value",
                              "rates must be positive (or null for unshaped); delay and burst >= 0")
        profiles[name] = prof
    return profiles


def get_profile(name: str) -> LinkProfile:
    """The profile called `name`; HpclabError listing the known ones otherwise."""
    profiles = load_profiles()
    if name not in profiles:
        raise HpclabError(f"unknown link profile '{name}'",
                          f"choose one of: {', '.join(profiles)} (defined in {PROFILES_FILE})")
    return profiles[name]


@dataclass
class Applied:
    """What `apply` did to one device: which parts of the profile took effect, and why not."""

    device: str
    netns: str  # "" for the host side
    rate: bool = False
    delay: bool = False
    notes: list[str] = field(default_factory=list)


def _tc(netns: str, *args: str) -> commands.Completed:
    # `tc -n` enters the namespace itself (unlike `ip netns exec`, it does not remount /sys).
    argv = ["tc"] + (["-n", netns] if netns else []) + list(args)
    done = commands.run(argv, "shape a virtual link with tc", timeout=30)
    return done or commands.Completed(argv, 124, "", f"`{' '.join(argv)}` did not answer within 30 s")


def apply(device: str, profile: LinkProfile, netns: str = "") -> Applied:
    """Shape egress of `device` (in namespace `netns`, "" = host) by `profile`.

    Replaces the device's root qdisc, so call it only on devices the project created. Returns
    which parts took effect; raises HpclabError only if the rate itself cannot be set.
    """
    done = Applied(device, netns)
    if not profile.shaped:
        return done
    r = _tc(netns, "qdisc", "replace", "dev", device, "root", "handle", "1:", "tbf",
            "rate", f"{profile.rate_mbit:g}mbit", "burst", str(profile.burst_bytes()),
            "limit", str(profile.limit_bytes()))
    if r.returncode != 0:
        raise HpclabError(f"tc could not shape {device} to {profile.rate_mbit:g} Mbit/s: {r.stderr.strip()}",
                          "check that the kernel has sch_tbf ('tc qdisc add dev lo root tbf ...' as a test)")
    done.rate = True
    if profile.delay_us > 0:
        r = _tc(netns, "qdisc", "add", "dev", device, "parent", "1:1", "handle", "10:", "netem",
                "delay", f"{profile.delay_us:g}us")
        if r.returncode == 0:
            done.delay = True
        else:
            err = r.stderr.strip().splitlines()[0] if r.stderr.strip() else f"exit {r.returncode}"
            done.notes.append(f"netem delay not applied ({err}): this kernel has no sch_netem")
    return done


def summary(profile: LinkProfile, applied: list[Applied]) -> str:
    """One line for `up`: the profile and which of its parts took effect on how many ends."""
    if not profile.shaped:
        return f"link '{profile.name}': not shaped ({profile.about})"
    n = len(applied)
    rated = sum(a.rate for a in applied)
    parts = [f"link '{profile.name}': rate {profile.rate_mbit:g} Mbit/s "
             f"({profile.rate_bytes_per_s / 1e6:g} MB/s) by tbf on {rated}/{n} veth ends"]
    if profile.delay_us > 0:
        delayed = sum(a.delay for a in applied)
        if delayed == n:
            parts.append(f"delay {profile.delay_us:g} us by netem on every end")
        elif delayed == 0:
            parts.append(f"delay {profile.delay_us:g} us NOT applied (no sch_netem in this kernel)")
        else:
            parts.append(f"delay {profile.delay_us:g} us on only {delayed}/{n} ends")
    return "; ".join(parts)
