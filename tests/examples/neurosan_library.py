# neuro-san's client library as its README (PyPI `neuro-san`, "Infrastructure")
# describes it: an AgentSession's two main methods, function() and
# streaming_chat(), through HttpServiceAgentSession, the implementation "to
# call neuro-san as a client to a HTTP service". The README shows no code for
# it; this is the least code that does what it says, with neuro-san's
# defaults (localhost, port 8080) unless a port is given as the argument.
# Run by tests/python/examples_neurosan.py (scripts/examples.sh).
import json
import sys

from neuro_san.session.http_service_agent_session import HttpServiceAgentSession

port = sys.argv[1] if len(sys.argv) > 1 else None
session = HttpServiceAgentSession(host="localhost", port=port, agent_name="memory")

# "This tells the client what the top-level agent will do for it."
print(json.dumps(session.function({})))

# "Send some text and it starts a conversation with a 'front man' agent."
request = {"user_message": {"type": "HUMAN", "text": "what do you know about Person:sarah"}}
for chat_response in session.streaming_chat(request):
    print(json.dumps(chat_response))
