"""The server starts, answers probes, and demands credentials."""

from lakefs_testing.live_server import LiveServer


def test_health_and_auth(server: LiveServer) -> None:
    import httpx

    assert httpx.get(f"{server.endpoint}/_health").status_code == 204
    anon = httpx.get(f"{server.api}/repositories")
    assert anon.status_code == 401
    assert anon.json()["message"]
    bad = httpx.get(f"{server.api}/repositories", auth=(server.access_key_id, "wrong"))
    assert bad.status_code == 401
