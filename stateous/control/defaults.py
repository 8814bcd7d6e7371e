"""The defaults of `stateous serve`, in a module that imports only the model's limits.

The command line reads them to describe its options, and the client side derives
its default URL from them, without loading the server.
"""

from stateous.model.limits import LEASE

DEFAULT_DB = "sqlite:///stateous.db"
DEFAULT_LISTEN = "127.0.0.1:8080"
DEFAULT_URL = f"http://{DEFAULT_LISTEN}"
#: The lease as `serve --lease` takes a duration: the model's, in whole minutes.
DEFAULT_LEASE = f"{LEASE // 60}m"
#: Request threads of the HTTP server; waiting writes commit together.
DEFAULT_THREADS = 8
#: Open connections at once; past them, new ones wait in the listen queue.
DEFAULT_CONNECTION_LIMIT = 1000
#: How long a connection may stay idle, leave answers unread, or take to send one request.
DEFAULT_CHANNEL_TIMEOUT = "60s"
#: Live streams (`GET /stream`) open at once; they hold no request thread.
DEFAULT_STREAMS = 500
