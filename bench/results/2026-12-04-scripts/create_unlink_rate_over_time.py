# One-off script of run d (bench/results/HISTORY.md), kept as the record of how its figures
# were taken: create+unlink cost every 2 s over a number of seconds (how this VM's unjournaled
# root disk slowed down as deletes piled up). It imports bench/run.py from this checkout
# (whose helpers may have changed since run d); /mnt/benchfs is that session's journaled ext4
# (docs/performance.md says how to make one).
import os,time,tempfile,sys
d=tempfile.mkdtemp(dir=sys.argv[1]); secs=float(sys.argv[2])
t0=time.monotonic(); i=0; last=t0; n=0
while time.monotonic()-t0<secs:
    p=f"{d}/f{i}"; fd=os.open(p,os.O_CREAT|os.O_WRONLY,0o600); os.close(fd); os.unlink(p); i+=1; n+=1
    now=time.monotonic()
    if now-last>=2:
        print(f"t={now-t0:5.1f}s  {(now-last)/n*1e6:7.1f} us per create+unlink  (total deleted {i})", flush=True); last=now; n=0
os.rmdir(d)
