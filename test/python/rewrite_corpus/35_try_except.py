for x, y in loader:
    try:
        opt.zero_grad()
        out = net(x)
        loss = crit(out, y)
        loss.backward()
        opt.step()
    except RuntimeError as err:  # out of memory: skip the batch
        print("skipped", err)
