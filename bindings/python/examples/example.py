import sys

import pocket

with pocket.Model(sys.argv[1]) as model, model.session() as session:
    print("Once upon a time", end="")
    for piece in session.generate("Once upon a time", max_tokens=48, temperature=0, stream=True):
        print(piece, end="", flush=True)  # whole UTF-8 characters, as they come
    print()
    st = session.stats
    print(f"{st.generated_tokens} tokens generated, stop: {st.stop_reason}, "
          f"{st.decode_tokens_per_second:.0f} tok/s", file=sys.stderr)
