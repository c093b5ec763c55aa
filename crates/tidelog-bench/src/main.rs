fn main() {
    println!("{}", rdkafka::util::get_rdkafka_version().1);
}
