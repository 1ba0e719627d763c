"""Concurrency parts the actors share, which are not actors: they own no task and no mailbox.

`slots.Slots` is the dispatcher's counting gate; `peer.PeerLink` is one connection's
server-to-client side (notifications, requests, and the routing of their replies);
`quiet.gap_between_requests` is how background work (graph sync, the workspace watcher) waits
for a gap between requests.
"""
