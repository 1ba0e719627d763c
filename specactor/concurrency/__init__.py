"""Concurrency parts the actors share, which are not actors: they own no task and no mailbox.

`slots.Slots` is the dispatcher's counting gate; `peer.PeerLink` is one connection's
server-to-client side (notifications, requests, and the routing of their replies).
"""
