#!/usr/bin/python3
"""A gRPC client for lab guests (python3-grpcio): calls METHOD on
grpc.example at ADDRESS with REQUEST and prints one line:
  ok <response> [<trailing metadata key>=<value> ...]  |  error <STATUS> <details>

  grpc_client.py ADDRESS CAFILE METHOD REQUEST
"""
import sys

import grpc

address, cafile, method, request = sys.argv[1:5]
channel = grpc.secure_channel(address, grpc.ssl_channel_credentials(root_certificates=open(cafile, "rb").read()),
                              options=(("grpc.ssl_target_name_override", "grpc.example"),
                                       ("grpc.default_authority", "grpc.example")))
try:
    response, call = channel.unary_unary(method).with_call(request.encode(), timeout=10)
    extra = " ".join("%s=%s" % (k, v) for k, v in call.trailing_metadata() if k.startswith("x-"))
    print(("ok " + response.decode() + " " + extra).strip(), flush=True)
except grpc.RpcError as e:
    print("error", e.code().name, e.details(), flush=True)
