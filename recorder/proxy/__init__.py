"""The recording proxy: a run forwarded to its agent, streamed back, every frame in the log.

proxy.py       Proxy: a run's slot, its row, the POST to the agent; Relay / Stream
request.py     the posted RunAgentInput checked, the headers forwarded to the agent
legs.py        AgentLeg, Answer: how a run reaches its agent; HttpLeg (by URL)
upstream.py    UpstreamClient: the HTTP/1.1 client for the agent leg
inprocess.py   AppLeg: an ASGI app of this process as the agent, called directly
recording.py   RunRecording: one streamed answer from head to close (its phases)
reader.py      FrameReader: the answer split into frames, a bounded way ahead
segments.py    ResponseRuns, Segment: the run each frame belongs to; closing runs
committer.py   GroupCommitter: what arrives during a commit goes in the next one
output.py      ClientOutput: the frames the client has yet to read
"""
