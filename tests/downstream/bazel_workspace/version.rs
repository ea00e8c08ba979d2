fn main() -> ncclbind::Result<()> {
    println!("NCCL {}", ncclbind::nccl_version()?);
    Ok(())
}
