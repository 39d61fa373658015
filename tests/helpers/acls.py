"""ACLs a test puts on its own resources of an Apache Kafka test cluster (as its administrator;
the shared clusters allow whatever no ACL names: ``mirror_lib.testing.kafka_broker.OPEN_ACLS``)."""

from __future__ import annotations

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)


def deny_on_topic(bootstrap: str, topic: str, operation: AclOperation) -> None:
    """Everyone may do everything on ``topic`` except ``operation`` (e.g. ALTER: CreatePartitions
    is refused with TOPIC_AUTHORIZATION_FAILED, as on a target whose admins own partition
    counts)."""

    def binding(op: AclOperation, permission: AclPermissionType) -> AclBinding:
        return AclBinding(
            ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:*", "*", op, permission
        )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    bindings = [
        binding(AclOperation.ALL, AclPermissionType.ALLOW),
        binding(operation, AclPermissionType.DENY),
    ]
    for future in admin.create_acls(bindings).values():
        future.result(30)


def grant(
    bootstrap: str,
    principal: str,
    resource: str,
    pattern: str,
    name: str,
    ops: str,
    permission: str = "ALLOW",
) -> None:
    """Create ACLs as the administrator: ``ops`` (comma-separated operation names) for
    ``principal`` on the ``resource`` (``TOPIC``, ``GROUP``, ...) named ``name``."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    bindings = [
        AclBinding(
            ResourceType[resource],
            name,
            ResourcePatternType[pattern],
            principal,
            "*",
            AclOperation[op],
            AclPermissionType[permission],
        )
        for op in ops.split(",")
    ]
    for future in admin.create_acls(bindings).values():
        future.result(30)
