"""The farm as the compile container sees it: a placeholder token, the scheduler over http,
the route's socket in the container's environment."""

from __future__ import annotations

from archwheel.effects.farm_proxy import PLACEHOLDER_TOKEN
from archwheel.wheelbuild.compile.dist_farm import (
    FARM_MOUNT,
    DistFarm,
    client_config_text,
    container_farm,
    container_farm_env,
)


def test_the_container_never_holds_the_token() -> None:
    farm = DistFarm("https://Farm.Example:8443", "SECRET-TOKEN", required=True)
    seen = container_farm(farm)
    assert seen == DistFarm("http://farm.example:8443", PLACEHOLDER_TOKEN, required=True)
    text = client_config_text(seen, "/build/.archwheel/toolchains")
    assert "SECRET-TOKEN" not in text and PLACEHOLDER_TOKEN in text
    # The server expands macros itself, so its objects are the local ones (farm tests).
    assert "\nrewrite_includes_only = true\n" in text
    assert container_farm_env() == {
        "ARCHWHEEL_FARM_SOCKET": f"{FARM_MOUNT}/farm.sock",
        "SCCACHE_CONF": "/build/.archwheel/sccache-dist.toml",
    }
