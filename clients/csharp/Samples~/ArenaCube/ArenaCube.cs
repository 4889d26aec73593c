using Tickwire;
using Tickwire.Arena;
using UnityEngine;

// Joins the arena and moves this object to the player's position from the snapshots.
public sealed class ArenaCube : MonoBehaviour
{
    public string server = "http://127.0.0.1:8080";
    TickwireClient client;
    SnapshotDecoder snapshots;
    readonly InputSender inputs = new InputSender();

    void Start()
    {
        bool webGl = Application.platform == RuntimePlatform.WebGLPlayer;
        client = new TickwireClient(new TickwireClientOptions
        {
            ServerUrl = server,
            Request = new MatchmakeRequest { Kind = "arena" },
            Transport = webGl ? TransportChoice.WebSocket : TransportChoice.Auto,
        });
        client.Start();
    }

    void Update()
    {
        client.Poll(); // all network work happens here, on the main thread
        ClientEvent e;
        while (client.TryGetEvent(out e))
        {
            if (e.Type != ClientEventType.Message) continue;
            if (e.Channel == ArenaChannels.Messages)
            {
                var m = ServerMessage.Decode(e.Message.Array, e.Message.Offset, e.Message.Count);
                if (m.Type == ServerMessageType.Welcome)
                    snapshots = new SnapshotDecoder(SnapshotSchema.FromWelcome(m), m.SnapshotHistory);
            }
            else if (e.Channel == ArenaChannels.Snapshots && snapshots != null)
            {
                try { var s = snapshots.Decode(e.Message); transform.position = new Vector3(s.Me.X, 0, s.Me.Y); }
                catch (SnapshotException) { } // dropped: the next one is a tick away
            }
        }
        if (snapshots == null) return;
        var input = inputs.Next(Input.GetAxis("Horizontal"), Input.GetAxis("Vertical"), 0,
            Input.GetButton("Fire1") ? Buttons.Fire : Buttons.None, snapshots.Newest);
        client.Send(ArenaChannels.Inputs, input.Array, input.Offset, input.Count);
    }

    void OnDestroy() { client.Close(); client.Poll(); }
}
