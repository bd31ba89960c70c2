#!/usr/bin/python3
"""A gRPC server for the lab's stand-in internet (python3-grpcio, the
reference implementation over HTTP/2 with TLS): methods of a service
"zn.Echo", messages as raw bytes (no protobuf needed).

  grpc_upstream.py ADDRESS:PORT CERT KEY

  /zn.Echo/Who      answers "auth:" + SHA-256 of the authorization metadata
                    (never the credential itself), or "auth:none"
  /zn.Echo/Echo     answers the request
  /zn.Echo/Reflect  answers "reflected" with the authorization as trailing
                    metadata x-echo (a hostile upstream: it must be scrubbed)
  /zn.Echo/Fail     fails with NOT_FOUND and a message
"""
import hashlib
import sys
from concurrent import futures

import grpc


class Echo(grpc.GenericRpcHandler):
    def service(self, details):
        metadata = dict(details.invocation_metadata)
        auth = metadata.get("authorization", "")

        def who(request, context):
            return ("auth:" + (hashlib.sha256(auth.encode()).hexdigest() if auth else "none")).encode()

        def echo(request, context):
            return request

        def reflect(request, context):
            context.set_trailing_metadata((("x-echo", auth),))
            return b"reflected"

        def fail(request, context):
            context.abort(grpc.StatusCode.NOT_FOUND, "no such thing")

        method = {"/zn.Echo/Who": who, "/zn.Echo/Echo": echo, "/zn.Echo/Reflect": reflect,
                  "/zn.Echo/Fail": fail}.get(details.method)
        return grpc.unary_unary_rpc_method_handler(method) if method else None


address, cert, key = sys.argv[1], sys.argv[2], sys.argv[3]
server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
server.add_generic_rpc_handlers((Echo(),))
server.add_secure_port(address, grpc.ssl_server_credentials([(open(key, "rb").read(), open(cert, "rb").read())]))
server.start()
server.wait_for_termination()
