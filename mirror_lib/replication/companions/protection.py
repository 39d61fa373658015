"""Write protection of a flow's remote topics on the target, and its lifting at cutover/failover.

A remote topic is the flow's copy: a record another principal writes there is not a copy of a
source record (``mirror verify`` finds it). MM2 only leaves ALLOW WRITE out of ACL sync;
principals that the target already grants WRITE (a prefixed or wildcard grant, or the same topic
name under IdentityReplicationPolicy) can still write. While a flow runs with
``mirror.protect.remote.topics = true`` (the default), every ACL refresh therefore adds, for each
principal holding an ALLOW of WRITE or ALL on a topic pattern that covers a remote topic, a
``DENY WRITE`` LITERAL binding on that remote topic (host ``*``). Kafka's authorizer lets a DENY
win over every ALLOW, so they can no longer write there.

The flow's own principal (from B's login, or ``mirror.protect.remote.topics.principal``) is
never denied. When it cannot be known, nothing is denied: a DENY could hit the flow itself.
``User:*`` is never denied either, though it would also catch principals with no grant of their
own: it would deny the flow too, unless the flow is a super user, which a client cannot see
(``super.users`` is not readable over the Admin API). A grant to ``User:*`` that covers a remote
topic is reported instead. Principals without any grant cannot write anyway, unless the broker
sets ``allow.everyone.if.no.acl.found=true`` and no ACL matches the topic at all.

``mirror cutover`` (applied, with ``--producers-stopped``) and ``mirror failover --apply`` lift
it: they first add a marker binding for each topic, then delete the protection's DENY bindings.
A running flow skips a topic with the marker, and takes back a DENY it added while a lift ran,
so a lift is never undone. The marker is ``DENY WRITE`` for :data:`LIFTED_PRINCIPAL` (a
principal type no client can authenticate as) on the topic resource :data:`MARKER_PREFIX` +
the topic's name, which no topic has: a binding on the topic itself would change who may use it
on a broker with ``allow.everyone.if.no.acl.found=true``, where a topic with no ACL is open to
all and a topic with any ACL only to those it names (seen on Apache Kafka: a marker on
``A.heartbeats`` shut the flow itself out).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from mirror_lib.config.model import MirrorConfig
from mirror_lib.errors import BrokerError, UnsupportedOperationError
from mirror_lib.kafka.admin_ops import AclBinding, AdminOps
from mirror_lib.kafka.clients import client_principal
from mirror_lib.replication.context import FlowContext

log = logging.getLogger(__name__)

#: The principal of the marker that says "protection lifted" on a topic (no client is one).
LIFTED_PRINCIPAL = "Mirror:write-protection-lifted"
#: The marker's resource: this prefix and the remote topic's name (a topic nobody creates).
MARKER_PREFIX = "__mirror_write_protection_lifted."
_WRITES = ("WRITE", "ALL")


def covers(binding: AclBinding, topic: str) -> bool:
    """Whether a TOPIC binding's resource pattern matches ``topic`` (LITERAL, ``*``, PREFIXED)."""
    if binding.resource_type != "TOPIC":
        return False
    if binding.pattern_type == "PREFIXED":
        return topic.startswith(binding.resource_name)
    return binding.pattern_type == "LITERAL" and binding.resource_name in (topic, "*")


def write_grants(bindings: Iterable[AclBinding], topic: str) -> list[AclBinding]:
    """The ALLOW WRITE/ALL bindings that let a principal write ``topic``."""
    return [
        b
        for b in bindings
        if b.permission == "ALLOW"
        and b.operation in _WRITES
        and not b.principal.startswith("Mirror:")
        and covers(b, topic)
    ]


def deny_write(topic: str, principal: str) -> AclBinding:
    """The protection's binding: ``principal`` may not write ``topic``, from any host."""
    return AclBinding(topic, "LITERAL", principal, "*", "WRITE", "DENY")


def lifted_marker(topic: str) -> AclBinding:
    """The binding that records that ``topic``'s protection was lifted (it denies nobody, and it
    is not on ``topic`` itself)."""
    return deny_write(MARKER_PREFIX + topic, LIFTED_PRINCIPAL)


def lifted_topics(bindings: Iterable[AclBinding]) -> set[str]:
    """Topics whose protection was lifted (they have a :func:`lifted_marker`)."""
    return {
        name
        for b in bindings
        if b.resource_name.startswith(MARKER_PREFIX)
        and b == lifted_marker(name := b.resource_name[len(MARKER_PREFIX) :])
    }


def _is_wildcard(principal: str) -> bool:
    return principal.partition(":")[2] == "*"


@dataclass
class ProtectionPlan:
    """What protects the topics now: the DENY bindings to add, and what cannot be protected."""

    add: list[AclBinding] = field(default_factory=list)
    open_to_all: dict[str, AclBinding] = field(default_factory=dict)
    lifted: set[str] = field(default_factory=set)


def plan_protection(
    bindings: list[AclBinding], topics: Iterable[str], flow_principal: str
) -> ProtectionPlan:
    """The DENY WRITE bindings missing on ``topics`` (lifted ones left alone) for every principal
    but ``flow_principal`` that holds a write grant covering them."""
    plan = ProtectionPlan(lifted=lifted_topics(bindings))
    present = set(bindings)
    for topic in sorted(set(topics) - plan.lifted):
        for grant in write_grants(bindings, topic):
            if grant.principal == flow_principal:
                continue
            if _is_wildcard(grant.principal):
                plan.open_to_all.setdefault(topic, grant)
                continue
            deny = deny_write(topic, grant.principal)
            if deny not in present and deny not in plan.add:
                plan.add.append(deny)
    return plan


def plan_lift(
    bindings: list[AclBinding], topics: Iterable[str], flow_principal: str | None
) -> list[AclBinding]:
    """The protection's DENY bindings on ``topics``: DENY WRITE (LITERAL, any host) for a
    principal that holds a write grant covering the topic, never the flow's own."""
    present = set(bindings)
    out: list[AclBinding] = []
    for topic in sorted(set(topics)):
        for grant in write_grants(bindings, topic):
            deny = deny_write(topic, grant.principal)
            if grant.principal != flow_principal and deny in present and deny not in out:
                out.append(deny)
    return out


def flow_principal(ctx: FlowContext) -> tuple[str | None, str]:
    """The principal the flow writes to its target as, and how it is known (or why not)."""
    if ctx.settings.protect_principal:
        return ctx.settings.protect_principal, "mirror.protect.remote.topics.principal"
    return client_principal(ctx.client("target", "producer"))


def flow_remote_topics(ctx: FlowContext, target_topics: Iterable[str]) -> list[str]:
    """The topics of the target that are the flow's remote topics, found by name alone (the
    source may be gone: failover)."""
    out = []
    for topic in target_topics:
        upstream = ctx.policy.upstream_topic(topic)
        if upstream and ctx.remote_topic(upstream) == topic and ctx.should_replicate(upstream):
            out.append(topic)
    return sorted(out)


class RemoteTopicGuard:
    """Keeps a flow's remote topics write-protected on its target (see the module's text).

    ``principal``: the flow's own (None: unknown, so nothing is denied; ``why`` says why).
    Problems that stay (no authorizer, no permission to read or create ACLs) are warned once.
    """

    def __init__(
        self, target: AdminOps, principal: str | None, why: str, where: str, flow: str
    ) -> None:
        self.target = target
        self.principal = principal
        self.why = why
        self.where = where
        self.flow = flow
        self._warned: set[str] = set()

    @classmethod
    def for_flow(cls, ctx: FlowContext, target: AdminOps) -> RemoteTopicGuard:
        principal, why = flow_principal(ctx)
        return cls(target, principal, why, ctx.where("target"), ctx.flow.name)

    def _warn_once(self, key: str, msg: str, *args: object) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(msg, *args)

    def refresh(self, topics: Iterable[str]) -> list[AclBinding]:
        """Add the DENY bindings ``topics`` lack; returns those added. A transient failure
        raises (the next refresh tries again)."""
        if self.principal is None:
            self._warn_once(
                "principal",
                "remote topics on %s are not write-protected: the principal flow %s writes as "
                "is not known (%s); set %s.mirror.protect.remote.topics.principal, or "
                "mirror.protect.remote.topics = false",
                self.where, self.flow, self.why, self.flow,
            )  # fmt: skip
            return []
        try:
            bindings = self.target.describe_topic_acls()
        except UnsupportedOperationError as e:
            self._warn_once(
                "acls",
                "remote topics on %s cannot be write-protected: it has no authorizer (%s); "
                "every principal that can connect may write them",
                self.where, e,
            )  # fmt: skip
            return []
        except BrokerError as e:
            if e.transient:
                raise
            self._refused(e)
            return []
        plan = plan_protection(bindings, topics, self.principal)
        for topic, grant in plan.open_to_all.items():
            self._warn_once(
                f"open-{topic}",
                "remote topic %s on %s cannot be write-protected: %s lets every principal write "
                "it, and a DENY for all of them would stop flow %s (%s) too",
                topic, self.where, grant, self.flow, self.principal,
            )  # fmt: skip
        if not plan.add:
            return []
        results = self.target.create_acls(plan.add)
        for b, err in results.items():
            if err is not None and not err.transient:
                self._refused(err)
            elif err is not None:
                log.error("could not write-protect %s on %s: %s", b.resource_name, self.where, err)
        created = self._take_back_lifted([b for b, err in results.items() if err is None])
        for b in created:
            log.info(
                "write-protected remote topic %s on %s: DENY WRITE for %s",
                b.resource_name, self.where, b.principal,
            )  # fmt: skip
        return created

    def _take_back_lifted(self, created: list[AclBinding]) -> list[AclBinding]:
        """Delete what was just added on topics whose protection a lift removed meanwhile (it
        writes its marker before deleting, so either it or this sees the other)."""
        if not created:
            return created
        lifted = lifted_topics(self.target.describe_topic_acls())
        back = [b for b in created if b.resource_name in lifted]
        if back:
            self.target.delete_acls(back)
        return [b for b in created if b not in back]

    def _refused(self, err: BrokerError) -> None:
        self._warn_once(
            "refused",
            "remote topics on %s are not write-protected: %s; %s needs DESCRIBE and ALTER on "
            "the cluster to read and create ACLs (or set mirror.protect.remote.topics = false)",
            self.where, err, self.principal,
        )  # fmt: skip


@dataclass
class Lift:
    """What lifting the protection of a flow's remote topics did (or would do)."""

    target: str
    topics: list[str]
    removed: list[AclBinding]
    applied: bool

    def describe(self) -> str:
        """One line: the topics, and the DENY bindings removed per topic."""
        verb = "lifted" if self.applied else "would lift"
        shown = ", ".join(self.topics[:20]) + (" ..." if len(self.topics) > 20 else "")
        count = len(self.topics)
        text = f"write protection {verb} on {self.target} for {count} remote topic"
        text += "" if count == 1 else "s"
        text += f" ({shown})" if self.topics else ""
        if not self.removed:
            return text + ": no DENY binding to remove"
        per_topic: dict[str, list[str]] = {}
        for b in self.removed:
            per_topic.setdefault(b.resource_name, []).append(b.principal)
        removed = "; ".join(f"{t}: {', '.join(p)}" for t, p in sorted(per_topic.items()))
        done = "removed" if self.applied else "would remove"
        text += f": {done} DENY WRITE for {removed}"
        return text + ("; they may write these topics now" if self.applied else "")


def lift_protection(ctx: FlowContext, topics: Iterable[str] | None, *, apply: bool) -> Lift | None:
    """Lift the write protection of ``topics`` (default: every remote topic of the flow found
    on the target); ``apply=False`` only says what it would do. None when the flow does not
    protect (the setting is off, or the target has no ACLs). A refused change raises
    :class:`BrokerError` naming the bindings left."""
    if not ctx.settings.protect_remote_topics:
        return None
    target = ctx.admin_ops("target")
    try:
        bindings = target.describe_topic_acls()
    except UnsupportedOperationError:
        return None
    existing = target.list_topics()
    if topics is None:
        names = flow_remote_topics(ctx, existing)
    else:
        names = sorted(t for t in set(topics) if t in existing)
    principal, _why = flow_principal(ctx)  # unknown: the flow never denied anything

    def removed(bindings: list[AclBinding]) -> list[AclBinding]:
        return plan_lift(bindings, names, principal) if principal else []

    if not apply:
        return Lift(ctx.target, names, removed(bindings), applied=False)
    done = lifted_topics(bindings)
    markers = [lifted_marker(t) for t in names if t not in done]
    failed = {b: e for b, e in target.create_acls(markers).items() if e is not None}
    lift = Lift(ctx.target, names, [], applied=True)
    if not failed:  # read after the markers: a DENY a flow adds from now on, it takes back
        lift.removed = removed(target.describe_topic_acls())
        failed = {b: e for b, e in target.delete_acls(lift.removed).items() if e is not None}
    if failed:
        b, err = next(iter(failed.items()))
        still = [x for x in lift.removed if x in failed] or removed(bindings)
        left = ", ".join(f"{x.resource_name} ({x.principal})" for x in still)
        raise BrokerError(
            f"lifting the write protection on {ctx.where('target')} failed ({b}: {err}); the "
            f"DENY WRITE bindings still there: {left or 'none'}. Delete them with "
            "kafka-acls.sh --remove, or run again with a principal that has ALTER on the cluster",
            transient=err.transient,
        )
    return lift


def lift_flow_protection(config: MirrorConfig, flow: str, *, apply: bool) -> Lift | None:
    """:func:`lift_protection` of every remote topic of ``flow`` (``A->B``) on its target, as
    ``mirror failover`` does: the source may be gone, so the topics are found on the target."""
    return lift_protection(FlowContext.create(config, flow), None, apply=apply)
